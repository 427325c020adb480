//! The kernel registry: every kernel's name, description, schedule, output and options, and a
//! builder that turns `key=value` arguments into a configured [`Kernel`].

use std::sync::Arc;

use serde::Serialize;

use crate::api::{Kernel, OutputKind, Schedule};
use crate::error::OptionsError;
use crate::options::{KernelOptions, OptionSpec};

/// A registry entry.
#[derive(Clone, Copy, Serialize)]
pub struct KernelSpec {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line saying what it does.
    pub description: &'static str,
    /// How the chunks of one file may be scheduled.
    pub schedule: Schedule,
    /// What it produces.
    pub output: OutputKind,
    /// Its options.
    pub options: &'static [OptionSpec],
    /// Reference its correctness is tested against.
    pub validated_against: &'static str,
    #[serde(skip)]
    build: fn(&KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError>,
}

impl std::fmt::Debug for KernelSpec {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KernelSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl KernelSpec {
    /// Whether the kernel takes the option `key`.
    pub fn takes_option(&self, key: &str) -> bool {
        self.options.iter().any(|option| option.key == key)
    }

    /// Parses `arguments` (`key=value`) and builds the kernel.
    pub fn build(&self, arguments: &[String]) -> Result<Arc<dyn Kernel>, OptionsError> {
        self.build_with_store_files(arguments, crate::store_files::StoreFiles::new())
    }

    /// Like [`KernelSpec::build`], with the contents of the store files its options name
    /// ([`crate::store_files`]), read by the run layer.
    pub fn build_with_store_files(
        &self,
        arguments: &[String],
        store_files: crate::store_files::StoreFiles,
    ) -> Result<Arc<dyn Kernel>, OptionsError> {
        let options =
            KernelOptions::parse(self.name, self.options, arguments)?.with_store_files(store_files);
        (self.build)(&options)
    }
}

const NO_OPTIONS: &[OptionSpec] = &[];

/// Every kernel, in listing order.
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec {
        name: "des-ecb",
        description: "DES in ECB mode (RAD's kernel); PKCS#7 padding by default",
        schedule: Schedule::ChunksInParallel,
        output: OutputKind::TransformedStream,
        options: crate::ciphers::DES_ECB_OPTIONS,
        validated_against: "NIST CAVP TDES ECB known-answer tests with KEY1=KEY2=KEY3",
        build: crate::ciphers::DesEcbKernel::from_options,
    },
    KernelSpec {
        name: "des-cbc",
        description: "DES in CBC mode; sequential within a file",
        schedule: Schedule::ChunksInOrder,
        output: OutputKind::TransformedStream,
        options: crate::ciphers::DES_CBC_OPTIONS,
        validated_against: "NIST CAVP TDES CBC known-answer tests with KEY1=KEY2=KEY3",
        build: crate::ciphers::DesCbcKernel::from_options,
    },
    KernelSpec {
        name: "aes128-ctr",
        description: "AES-128 in CTR mode (128-bit big-endian counter); encrypts and decrypts",
        schedule: Schedule::ChunksInParallel,
        output: OutputKind::TransformedStream,
        options: crate::ciphers::AES_CTR_OPTIONS,
        validated_against: "NIST SP 800-38A F.5.1/F.5.2 CTR-AES128 vectors",
        build: crate::ciphers::Aes128CtrKernel::from_options,
    },
    KernelSpec {
        name: "sobel",
        description: "Sobel edge magnitude of an 8-bit grayscale PNG, PNG out (RAD's kernel)",
        schedule: Schedule::ChunksInOrder,
        output: OutputKind::TransformedStream,
        options: NO_OPTIONS,
        validated_against: "a separate plain reference implementation on the shared images",
        build: crate::sobel::SobelKernel::from_options,
    },
    KernelSpec {
        name: "langid",
        description: "n-gram language identification per piece or per file (SISC's application)",
        schedule: Schedule::ChunksInParallel,
        output: OutputKind::Summary,
        options: crate::langid::LANGID_OPTIONS,
        validated_against: "held-out UDHR paragraphs (train on first 70% of each translation)",
        build: crate::langid::LangIdKernel::from_options,
    },
    KernelSpec {
        name: "grep",
        description: "lines matching a literal or a regular expression, with line numbers",
        schedule: Schedule::ChunksInParallel,
        output: OutputKind::Summary,
        options: crate::grep::GREP_OPTIONS,
        validated_against: "a line-by-line reference search over whole inputs",
        build: crate::grep::GrepKernel::from_options,
    },
    KernelSpec {
        name: "crc32c",
        description: "CRC32C (Castagnoli) of each file, chunk CRCs combined in order",
        schedule: Schedule::ChunksInParallel,
        output: OutputKind::Summary,
        options: NO_OPTIONS,
        validated_against: "RFC 3720 B.4 test vectors and one-shot crc32c",
        build: crate::checksums::Crc32cKernel::from_options,
    },
    KernelSpec {
        name: "sha256",
        description: "SHA-256 digest of each file",
        schedule: Schedule::ChunksInOrder,
        output: OutputKind::Summary,
        options: NO_OPTIONS,
        validated_against: "FIPS 180-2 example digests",
        build: crate::checksums::Sha256Kernel::from_options,
    },
    KernelSpec {
        name: "knn",
        description: "k nearest f32 vectors for a batch of queries in one pass (SISC 2.1)",
        schedule: Schedule::ChunksInParallel,
        output: OutputKind::Summary,
        options: crate::knn::KNN_OPTIONS,
        validated_against: "brute force: all distances sorted",
        build: crate::knn::KnnKernel::from_options,
    },
    KernelSpec {
        name: "sort",
        description:
            "external merge sort of fixed-size records by key prefix, bounded memory (SISC 2.1)",
        schedule: Schedule::ChunksInOrder,
        output: OutputKind::TransformedStream,
        options: crate::external_sort::SORT_OPTIONS,
        validated_against: "a stable in-memory sort",
        build: crate::external_sort::ExternalSortKernel::from_options,
    },
    KernelSpec {
        name: "search-index",
        description: "sparse index of a sorted record file for one-probe binary search (SISC 2.1)",
        schedule: Schedule::ChunksInOrder,
        output: OutputKind::Summary,
        options: crate::binary_search::SEARCH_INDEX_OPTIONS,
        validated_against: "a linear scan for the first record with each key",
        build: crate::binary_search::SearchIndexKernel::from_options,
    },
    KernelSpec {
        name: "blastn",
        description: "nucleotide search like NCBI blastn (megablast or blastn task), tabular out",
        schedule: Schedule::ChunksInOrder,
        output: OutputKind::TransformedStream,
        options: crate::blast::BLASTN_OPTIONS,
        validated_against: "NCBI BLAST+ 2.12 blastn -outfmt 6 -dust no on BioMarKs 18S sequences",
        build: crate::blast::BlastKernel::from_options,
    },
    KernelSpec {
        name: "wasm",
        description:
            "a user's WebAssembly module, sandboxed; its schedule and output are the module's",
        schedule: Schedule::ChunksInParallel,
        output: OutputKind::Summary,
        options: crate::wasm::WASM_OPTIONS,
        validated_against: "the built-in crc32c and plain Rust word counts and byte histograms",
        build: crate::wasm::WasmKernel::from_options,
    },
];

/// Finds a kernel by name.
pub fn find_kernel(name: &str) -> Result<&'static KernelSpec, OptionsError> {
    KERNELS
        .iter()
        .find(|spec| spec.name == name)
        .ok_or_else(|| OptionsError::UnknownKernel {
            name: name.to_string(),
            known: KERNELS
                .iter()
                .map(|spec| spec.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Finds a kernel by name and builds it from `key=value` arguments.
pub fn build_kernel(name: &str, arguments: &[String]) -> Result<Arc<dyn Kernel>, OptionsError> {
    find_kernel(name)?.build(arguments)
}
