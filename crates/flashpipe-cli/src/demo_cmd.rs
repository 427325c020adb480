//! `flashpipe demo`: the main job on an embedded default.
//!
//! It opens and creates its store through `flashpipe-store` (`format_file_store`,
//! `RunningStore`), as every interface does; the notes of opening go to standard error.
//!
//! Builds a store striped over two device files in a local folder (or, with
//! `--disk-nodes N`, over N disk nodes on this machine: flashpipe's NBD server exporting a
//! RAM disk each over loopback TCP, reached through the NBD client, as the HWFS thesis's
//! head node stripes over remote RAM disks, 3.3.2), ingests sample data
//! (the files of `../shared/data` when present, generated files otherwise) and one large
//! generated file, unmounts, remounts, reads everything back through the engine,
//! verifies every file's CRC32C, checks the store with fsck, and prints a short report
//! with throughputs. It then runs language identification (the profile shipped in the
//! binary) and Sobel next to the data through the pipeline, beside reading everything first:
//! on held-out UDHR texts (from the corpus in the shared data folder when present, else the
//! sample shipped in `data/langid-sample.tsv`) and on the sample images (else one generated
//! image).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use std::sync::Arc;

use flashpipe_device::RamDisk;
use flashpipe_device::SplitMix64;
use flashpipe_engine::{Command as EngineCommand, EngineClient, Reply};
use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::langid::builtin::builtin_model;
use flashpipe_kernels::langid::udhr::{load_udhr, CorpusSelection};
use flashpipe_kernels::langid::LangIdKernel;
use flashpipe_kernels::registry::build_kernel;
use flashpipe_kernels::sobel::{encode_gray_png, GrayImage};
use flashpipe_nbd::server::{Export, InitialAllocation, NbdServer, ServerConfig};
use flashpipe_pipeline::demo::{run_near_data_demo, DemoRow, NearDataDemo, HELD_OUT_PREFIX};
use flashpipe_store::create::{format_file_store, FILE_STORE_QUEUE_DEPTH};
use flashpipe_store::put_plan::plan_put;
use flashpipe_store::store_config::DEVICE_BLOCK_SIZE_BYTES;
use flashpipe_store::units::{parse_size_bytes, HumanBytes};
use flashpipe_store::{LockWait, RunningStore, StoreAccess};
use serde_json::json;

use flashpipe_bench::error::{internal, io_with, BenchError, BenchErrorKind};
use flashpipe_bench::progress::Progress;
use flashpipe_bench::BenchResult;

/// Options of `flashpipe demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Folder for the demo store (its store file and device files are replaced).
    #[arg(long, default_value = "demo-store")]
    pub dir: PathBuf,
    /// Sample data to ingest; generated files are used when the folder is absent (default:
    /// $FLASHPIPE_SHARED_DATA, else ../shared/data).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Size of the large generated file.
    #[arg(long, default_value = "256MiB")]
    pub large_file_size: String,
    /// Stripe the store over this many disk nodes on this machine (NBD servers exporting
    /// a RAM disk each over loopback TCP, HWFS 3.3.2) instead of two device files.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_DISK_NODES as i64))]
    pub disk_nodes: Option<u32>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Most disk nodes `--disk-nodes` starts.
pub const MAX_DISK_NODES: u32 = 16;

const STORE_FILE: &str = "demo.toml";
const DEVICE_FILES: [&str; 2] = ["demo-a.img", "demo-b.img"];
const LARGE_FILE_NAME: &str = "generated:large.bin";
const CHUNK_BYTES: usize = 1 << 20;
const IN_FLIGHT: usize = 8;

/// One file of the demo with its checksum at ingest.
struct DemoFile {
    name: String,
    size_bytes: u64,
    crc32c: u32,
}

impl DemoArgs {
    /// The sample data folder: `--data`, else the shared data folder.
    fn data_directory(&self) -> PathBuf {
        self.data
            .clone()
            .unwrap_or_else(flashpipe_kernels::shared_data::shared_data_directory)
    }
}

/// Runs the demo.
pub fn run(arguments: DemoArgs) -> BenchResult {
    let large_file_bytes = parse_size_bytes(&arguments.large_file_size)?;
    let samples = sample_sources(&arguments.data_directory())?;
    let sample_bytes: u64 = samples.iter().map(|source| source.size_bytes()).sum();
    let payload_bytes = sample_bytes + large_file_bytes;
    // The disk nodes serve until the demo ends.
    let (store_path, _disk_nodes) = match arguments.disk_nodes {
        None => {
            let store_path = prepare_store(&arguments.dir, payload_bytes)?;
            say(
                &arguments,
                &format!(
                    "store {} striped over {} device files",
                    store_path.display(),
                    DEVICE_FILES.len()
                ),
            );
            (store_path, Vec::new())
        }
        Some(nodes) => {
            let (store_path, servers) =
                prepare_disk_node_store(&arguments.dir, payload_bytes, nodes)?;
            say(
                &arguments,
                &format!(
                    "store {} striped over {nodes} disk nodes on this machine ({})",
                    store_path.display(),
                    servers
                        .iter()
                        .map(|server| server.uris(DISK_NODE_EXPORT).join(" "))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            (store_path, servers)
        }
    };

    let progress = Progress::spinner(format!(
        "writing {} sample file(s) and a {} file into the store",
        samples.len(),
        HumanBytes(large_file_bytes)
    ));
    let store = open_store(&store_path)?;
    let mut client = store.client(IN_FLIGHT * 2);
    let started = Instant::now();
    let ingested = ingest(&mut client, &samples, large_file_bytes);
    let flushed = client.call(EngineCommand::Flush);
    store.close()?;
    let files = ingested?;
    flushed?;
    let write_seconds = started.elapsed().as_secs_f64();
    let total_bytes: u64 = files.iter().map(|file| file.size_bytes).sum();

    progress.set_message("remounting, reading every file back and checking its CRC32C");
    let store = open_store(&store_path)?;
    let mut client = store.client(IN_FLIGHT * 2);
    let started = Instant::now();
    let verified = verify(&mut client, &files);
    let read_seconds = started.elapsed().as_secs_f64();
    store.close()?;
    let mismatches = verified?;

    let round_trip = RoundTrip {
        file_count: files.len(),
        total_bytes,
        large_file_bytes,
        write_seconds,
        read_seconds,
        fsck_clean: {
            progress.set_message("fsck");
            fsck_clean(&store_path)?
        },
        mismatches,
    };
    progress.finish();
    if !arguments.json {
        print_round_trip(&round_trip);
    }
    if !round_trip.mismatches.is_empty() || !round_trip.fsck_clean {
        return Err(BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::InvalidData),
            format!(
                "{} file(s) differ after the round trip, fsck clean: {}",
                round_trip.mismatches.len(),
                round_trip.fsck_clean
            ),
        )
        .into());
    }
    let near_data_progress = Progress::spinner("running language ID and Sobel next to the data");
    let near_data_rows = near_data(&arguments, &store_path, &files);
    near_data_progress.finish();
    let near_data_rows = near_data_rows?;
    if arguments.json {
        let mut report = round_trip.to_json();
        report["near_data"] = json!(near_data_rows);
        println!("{report}");
    } else {
        print_next(&arguments);
    }
    Ok(())
}

/// Held-out language texts the near-data step classifies (a sample, to keep it short).
const NEAR_DATA_TEXT_FILES: usize = 40;

/// Held-out texts shipped for when no corpus is at hand (`scripts/langid-demo-sample` made
/// them): `CODE<TAB>STEM<TAB>TEXT` lines.
const SHIPPED_HELD_OUT_TEXTS: &str = include_str!("../data/langid-sample.tsv");

/// Side of the image generated when no sample image is stored, in pixels.
const GENERATED_IMAGE_SIDE: usize = 512;

/// Name of the generated image in the store.
const GENERATED_IMAGE_NAME: &str = "generated:rings.png";

/// A held-out text to store: its language, its file stem, its bytes.
struct HeldOutText {
    language: String,
    stem: String,
    text: Vec<u8>,
}

/// Runs language identification (the shipped profile) and Sobel next to the data through the
/// pipeline and prints them beside reading everything first.
fn near_data(
    arguments: &DemoArgs,
    store_path: &Path,
    files: &[DemoFile],
) -> Result<Vec<DemoRow>, Box<dyn std::error::Error>> {
    let udhr = arguments.data_directory().join("udhr");
    let texts = match load_udhr(&udhr, CorpusSelection::default()) {
        Ok(documents) => {
            let step = (documents.len() / NEAR_DATA_TEXT_FILES).max(1);
            say(
                arguments,
                &format!("language ID: the shipped profile (trained on wordfreq word lists and 70% of each UDHR translation); the held-out 30% of {NEAR_DATA_TEXT_FILES} translations of {} stored and classified near the data", udhr.display()),
            );
            documents
                .into_iter()
                .step_by(step)
                .take(NEAR_DATA_TEXT_FILES)
                .map(|document| HeldOutText {
                    stem: document.file.trim_end_matches(".html").to_string(),
                    language: document.language,
                    text: document.test_text,
                })
                .collect()
        }
        Err(_) => {
            let texts = shipped_held_out_texts();
            say(
                arguments,
                &format!("language ID: the shipped profile (trained on wordfreq word lists and 70% of each UDHR translation); {} held-out texts shipped with the demo stored and classified near the data", texts.len()),
            );
            texts
        }
    };
    let model = builtin_model()?;
    let langid: Arc<dyn Kernel> = Arc::new(Arc::new(LangIdKernel::new(model, 2048)));
    let store = open_store(store_path)?;
    let stored = store_held_out_texts(&store, &texts).and_then(|text_files| {
        let mut image_files: Vec<String> =
            stored_names(files, "data:images:", ".png").collect();
        if image_files.is_empty() {
            say(
                arguments,
                &format!("Sobel: no sample images, so one generated {GENERATED_IMAGE_SIDE}x{GENERATED_IMAGE_SIDE} grayscale image ({GENERATED_IMAGE_NAME})"),
            );
            image_files.push(store_generated_image(&store)?);
        }
        Ok((text_files, image_files))
    });
    let (text_files, image_files) = match stored {
        Ok(names) => names,
        Err(error) => {
            store.close()?;
            return Err(error);
        }
    };
    let sobel = build_kernel("sobel", &[])?;
    let demo = NearDataDemo {
        engine: &store.engine,
        engine_config: &store.engine_config,
        langid,
        text_files,
        sobel,
        image_files,
    };
    let mut sink: Box<dyn std::io::Write> = if arguments.json {
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::stdout())
    };
    let rows = run_near_data_demo(&demo, &mut sink);
    store.close()?;
    Ok(rows?)
}

/// The held-out texts shipped with the demo.
fn shipped_held_out_texts() -> Vec<HeldOutText> {
    SHIPPED_HELD_OUT_TEXTS
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let language = fields.next()?;
            let stem = fields.next()?;
            let text = fields.next()?;
            Some(HeldOutText {
                language: language.to_string(),
                stem: stem.to_string(),
                text: text.as_bytes().to_vec(),
            })
        })
        .collect()
}

/// Writes each held-out text into the store as `heldout:<language>:<stem>.txt` and returns the
/// names.
fn store_held_out_texts(
    store: &RunningStore,
    texts: &[HeldOutText],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut client = store.client(IN_FLIGHT * 2);
    let mut names = Vec::new();
    for text in texts {
        let name = format!("{HELD_OUT_PREFIX}{}:{}.txt", text.language, text.stem);
        client.write_stream(
            &name,
            &mut &text.text[..],
            CHUNK_BYTES,
            IN_FLIGHT,
            &mut |_| {},
        )?;
        names.push(name);
    }
    client.call(EngineCommand::Flush)?;
    Ok(names)
}

/// A grayscale image with edges in every direction: concentric rings over a gradient.
fn generated_image() -> GrayImage {
    let side = GENERATED_IMAGE_SIDE;
    let centre = side as f64 / 2.0;
    let pixels = (0..side * side)
        .map(|index| {
            let (x, y) = ((index % side) as f64, (index / side) as f64);
            let radius = ((x - centre).powi(2) + (y - centre).powi(2)).sqrt();
            let ring = if (radius / 24.0) as u64 % 2 == 0 {
                160.0
            } else {
                40.0
            };
            (ring + x * 48.0 / side as f64) as u8
        })
        .collect();
    GrayImage {
        width: side,
        height: side,
        pixels,
    }
}

/// Stores the generated image and returns its name.
fn store_generated_image(store: &RunningStore) -> Result<String, Box<dyn std::error::Error>> {
    let png = encode_gray_png(&generated_image())
        .map_err(|error| internal(format!("cannot encode the generated image: {error}")))?;
    let mut client = store.client(IN_FLIGHT * 2);
    client.write_stream(
        GENERATED_IMAGE_NAME,
        &mut &png[..],
        CHUNK_BYTES,
        IN_FLIGHT,
        &mut |_| {},
    )?;
    client.call(EngineCommand::Flush)?;
    Ok(GENERATED_IMAGE_NAME.to_string())
}

fn stored_names<'a>(
    files: &'a [DemoFile],
    prefix: &'a str,
    suffix: &'a str,
) -> impl Iterator<Item = String> + 'a {
    files
        .iter()
        .filter(move |file| file.name.starts_with(prefix) && file.name.ends_with(suffix))
        .map(|file| file.name.clone())
}

/// Opens the store for changes, failing at once when another process uses it; the notes
/// of opening its devices go to standard error.
fn open_store(store_path: &Path) -> Result<RunningStore, Box<dyn std::error::Error>> {
    let store = RunningStore::open(store_path, StoreAccess::ReadWrite, LockWait::Fail)?;
    for note in &store.notes {
        print_note(note);
    }
    Ok(store)
}

fn print_note(note: &str) {
    eprintln!("note: {note}");
}

fn say(arguments: &DemoArgs, line: &str) {
    if !arguments.json {
        flashpipe_bench::progress::output_line(line);
    }
}

/// A file to ingest: a local file or generated bytes.
enum SampleSource {
    Local {
        path: PathBuf,
        name: String,
        size_bytes: u64,
    },
    Generated {
        name: String,
        seed: u64,
        size_bytes: u64,
    },
}

impl SampleSource {
    fn size_bytes(&self) -> u64 {
        match self {
            SampleSource::Local { size_bytes, .. } | SampleSource::Generated { size_bytes, .. } => {
                *size_bytes
            }
        }
    }
}

fn sample_sources(data: &Path) -> Result<Vec<SampleSource>, Box<dyn std::error::Error>> {
    if data.is_dir() {
        let planned = plan_put(&[data.to_path_buf()], Some("data"))?;
        return Ok(planned
            .into_iter()
            .map(|source| SampleSource::Local {
                path: source.path,
                name: source.name,
                size_bytes: source.size_bytes,
            })
            .collect());
    }
    let mut generator = SplitMix64::new(0xDA7A);
    Ok((0..500)
        .map(|index| SampleSource::Generated {
            name: format!("generated:small-{index:03}.bin"),
            seed: index,
            size_bytes: 1 + generator.below(64 << 10),
        })
        .collect())
}

fn prepare_store(dir: &Path, payload_bytes: u64) -> Result<PathBuf, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).map_err(io_with(dir.display()))?;
    for name in std::iter::once(STORE_FILE).chain(DEVICE_FILES) {
        let path = dir.join(name);
        if path.exists() {
            std::fs::remove_file(&path).map_err(io_with(path.display()))?;
        }
    }
    let per_device_bytes =
        (payload_bytes * 2 / DEVICE_FILES.len() as u64 + (64 << 20)).next_multiple_of(1 << 20);
    let store_path = dir.join(STORE_FILE);
    format_file_store(
        &store_path,
        &DEVICE_FILES,
        per_device_bytes,
        &mut print_note,
    )?;
    Ok(store_path)
}

/// The export name of every disk node.
const DISK_NODE_EXPORT: &str = "disk";

/// Starts `nodes` disk nodes (flashpipe's NBD server, a RAM disk each, loopback TCP on a
/// free port) and creates the demo store striped over them through their `nbd://` URIs.
fn prepare_disk_node_store(
    dir: &Path,
    payload_bytes: u64,
    nodes: u32,
) -> Result<(PathBuf, Vec<NbdServer>), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).map_err(io_with(dir.display()))?;
    let store_path = dir.join(STORE_FILE);
    if store_path.exists() {
        std::fs::remove_file(&store_path).map_err(io_with(store_path.display()))?;
    }
    let per_node_bytes =
        (payload_bytes * 2 / u64::from(nodes) + (64 << 20)).next_multiple_of(1 << 20);
    let mut servers = Vec::with_capacity(nodes as usize);
    for index in 0..nodes {
        let disk = RamDisk::new(
            &format!("disk node {index}"),
            DEVICE_BLOCK_SIZE_BYTES,
            per_node_bytes / u64::from(DEVICE_BLOCK_SIZE_BYTES),
            FILE_STORE_QUEUE_DEPTH,
        )?;
        let config = ServerConfig {
            tcp_address: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            ..ServerConfig::default()
        };
        servers.push(NbdServer::start(
            config,
            vec![Export {
                name: DISK_NODE_EXPORT.to_string(),
                description: format!("demo disk node {index}: a RAM disk"),
                device: Box::new(disk),
                read_only: false,
                trim_reads_zeroes: true,
                initial_allocation: InitialAllocation::AllHoles,
            }],
        )?);
    }
    let uris: Vec<String> = servers
        .iter()
        .map(|server| server.uris(DISK_NODE_EXPORT).remove(0))
        .collect();
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    format_file_store(&store_path, &uris, per_node_bytes, &mut print_note)?;
    Ok((store_path, servers))
}

/// A reader that computes the CRC32C of what passes through it.
struct ChecksummingReader<R> {
    inner: R,
    crc32c: u32,
}

impl<R: Read> Read for ChecksummingReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let count = self.inner.read(buffer)?;
        self.crc32c = crc32c::crc32c_append(self.crc32c, &buffer[..count]);
        Ok(count)
    }
}

/// Deterministic pseudo-random bytes, `size_bytes` of them.
struct GeneratedReader {
    generator: SplitMix64,
    remaining_bytes: u64,
}

impl Read for GeneratedReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let count = buffer.len().min(self.remaining_bytes as usize);
        for chunk in buffer[..count].chunks_mut(8) {
            let bytes = self.generator.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        self.remaining_bytes -= count as u64;
        Ok(count)
    }
}

fn ingest(
    client: &mut EngineClient,
    samples: &[SampleSource],
    large_file_bytes: u64,
) -> Result<Vec<DemoFile>, Box<dyn std::error::Error>> {
    let mut files = Vec::with_capacity(samples.len() + 1);
    for sample in samples {
        let (name, reader): (&str, Box<dyn Read>) = match sample {
            SampleSource::Local { path, name, .. } => (
                name,
                Box::new(std::fs::File::open(path).map_err(io_with(path.display()))?),
            ),
            SampleSource::Generated {
                name,
                seed,
                size_bytes,
            } => (
                name,
                Box::new(GeneratedReader {
                    generator: SplitMix64::new(*seed),
                    remaining_bytes: *size_bytes,
                }),
            ),
        };
        files.push(store_one(client, name, reader)?);
    }
    let large = GeneratedReader {
        generator: SplitMix64::new(0x1A26E),
        remaining_bytes: large_file_bytes,
    };
    files.push(store_one(client, LARGE_FILE_NAME, Box::new(large))?);
    Ok(files)
}

fn store_one(
    client: &mut EngineClient,
    name: &str,
    reader: Box<dyn Read>,
) -> Result<DemoFile, Box<dyn std::error::Error>> {
    let mut checksumming = ChecksummingReader {
        inner: reader,
        crc32c: 0,
    };
    let size_bytes =
        client.write_stream(name, &mut checksumming, CHUNK_BYTES, IN_FLIGHT, &mut |_| {})?;
    Ok(DemoFile {
        name: name.to_string(),
        size_bytes,
        crc32c: checksumming.crc32c,
    })
}

/// Reads every file back and returns the names whose size or checksum differ.
fn verify(
    client: &mut EngineClient,
    files: &[DemoFile],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut mismatches = Vec::new();
    for file in files {
        let mut crc32c = 0;
        let size_bytes = client.read_stream(
            &file.name,
            &mut |chunk| {
                crc32c = crc32c::crc32c_append(crc32c, chunk);
                Ok(())
            },
            CHUNK_BYTES as u64,
            IN_FLIGHT,
            &mut |_| {},
        )?;
        if size_bytes != file.size_bytes || crc32c != file.crc32c {
            mismatches.push(file.name.clone());
        }
    }
    Ok(mismatches)
}

fn fsck_clean(store_path: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    let store = open_store(store_path)?;
    let mut client = store.client(1);
    let reply = client.call(EngineCommand::Check);
    store.close()?;
    match reply? {
        Reply::Check(report) => Ok(report.is_clean()),
        _ => Err(internal("the engine answered a check with no report").into()),
    }
}

/// What the round trip measured.
struct RoundTrip {
    file_count: usize,
    total_bytes: u64,
    large_file_bytes: u64,
    write_seconds: f64,
    read_seconds: f64,
    fsck_clean: bool,
    mismatches: Vec<String>,
}

impl RoundTrip {
    fn write_bytes_per_second(&self) -> f64 {
        self.total_bytes as f64 / self.write_seconds.max(1e-9)
    }

    fn read_bytes_per_second(&self) -> f64 {
        self.total_bytes as f64 / self.read_seconds.max(1e-9)
    }

    fn to_json(&self) -> serde_json::Value {
        json!({"files": self.file_count, "bytes": self.total_bytes,
               "write_seconds": self.write_seconds, "read_seconds": self.read_seconds,
               "write_bytes_per_second": self.write_bytes_per_second(),
               "read_bytes_per_second": self.read_bytes_per_second(),
               "checksum_mismatches": self.mismatches, "fsck_clean": self.fsck_clean})
    }
}

fn print_round_trip(round_trip: &RoundTrip) {
    let RoundTrip {
        file_count,
        total_bytes,
        large_file_bytes,
        write_seconds,
        read_seconds,
        fsck_clean,
        ref mismatches,
    } = *round_trip;
    let write_bytes_per_second = round_trip.write_bytes_per_second();
    let read_bytes_per_second = round_trip.read_bytes_per_second();
    println!(
        "ingested {file_count} file(s), {} (including {} generated as {LARGE_FILE_NAME})",
        HumanBytes(total_bytes),
        HumanBytes(large_file_bytes)
    );
    println!(
        "  write + flush: {write_seconds:.3} s, {}/s",
        HumanBytes(write_bytes_per_second as u64)
    );
    println!(
        "  remount, read back: {read_seconds:.3} s, {}/s",
        HumanBytes(read_bytes_per_second as u64)
    );
    println!(
        "  CRC32C of every file: {}",
        if mismatches.is_empty() {
            "all match".to_string()
        } else {
            format!("{} differ", mismatches.len())
        }
    );
    println!(
        "  fsck: {}",
        if fsck_clean {
            "clean"
        } else {
            "FINDINGS (run flashpipe fsck)"
        }
    );
}

/// The closing hint: commands to try next.
fn print_next(arguments: &DemoArgs) {
    if arguments.disk_nodes.is_some() {
        println!(
            "the disk nodes ended with the demo; next: `flashpipe nbd serve` on other machines and `flashpipe mkfs --devices nbd://HOST/EXPORT,...` over them"
        );
        return;
    }
    println!(
        "next: `flashpipe ls {0}`, `flashpipe df {0}`, `flashpipe bench device`",
        arguments.dir.join(STORE_FILE).display()
    );
}
