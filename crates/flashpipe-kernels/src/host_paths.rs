//! The kernel options whose values name paths on the host, and what each path is for.
//!
//! A kernel run in the CLI's own process opens these paths as the user who runs it. A
//! kernel run through a server would open them as the server's user, for any client:
//! the server refuses them from clients and supplies its own (`flashpipe serve
//! --spill-dir`, `--kernel-data`; crates/flashpipe-server/src/kernel_paths.rs). Every
//! option that names a host path is listed here; a test keeps the list in step with
//! the registry's option tables.

/// What a host path option is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPathUse {
    /// A folder the kernel writes scratch files into (a sort's spilled runs).
    SpillFolder,
    /// A file the kernel reads when it is built (a query set, a profile file).
    InputFile,
}

/// One option naming a host path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPathOption {
    /// The kernel's name in the registry.
    pub kernel: &'static str,
    /// The option's key.
    pub key: &'static str,
    /// What the path is for.
    pub path_use: HostPathUse,
}

/// Every kernel option that names a host path.
pub const HOST_PATH_OPTIONS: &[HostPathOption] = &[
    HostPathOption {
        kernel: "sort",
        key: "temp_dir",
        path_use: HostPathUse::SpillFolder,
    },
    HostPathOption {
        kernel: "knn",
        key: "queries",
        path_use: HostPathUse::InputFile,
    },
    HostPathOption {
        kernel: "langid",
        key: "profiles",
        path_use: HostPathUse::InputFile,
    },
    HostPathOption {
        kernel: "blastn",
        key: "queries",
        path_use: HostPathUse::InputFile,
    },
    HostPathOption {
        kernel: "wasm",
        key: "module_path",
        path_use: HostPathUse::InputFile,
    },
];

/// The host path options of `kernel`.
pub fn host_path_options(kernel: &str) -> impl Iterator<Item = &'static HostPathOption> + '_ {
    HOST_PATH_OPTIONS
        .iter()
        .filter(move |option| option.kernel == kernel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{find_kernel, KERNELS};

    #[test]
    fn every_listed_option_exists_and_every_path_option_is_listed() {
        for listed in HOST_PATH_OPTIONS {
            let kernel = find_kernel(listed.kernel).expect("a listed kernel is registered");
            assert!(
                kernel.takes_option(listed.key),
                "{} has option {}",
                listed.kernel,
                listed.key
            );
        }
        for kernel in KERNELS {
            for option in kernel.options {
                let help = option.help.to_ascii_lowercase();
                let names_path = help.starts_with("file ")
                    || help.starts_with("folder ")
                    || help.starts_with("profile file")
                    || help.contains(" path");
                if names_path {
                    assert!(
                        host_path_options(kernel.name).any(|listed| listed.key == option.key),
                        "{}'s option {} names a host path and must be listed",
                        kernel.name,
                        option.key
                    );
                }
            }
        }
    }
}
