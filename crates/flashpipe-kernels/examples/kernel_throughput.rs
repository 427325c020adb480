//! Prints the in-memory throughput table of every kernel without building the whole CLI
//! (`cargo run -p flashpipe-kernels --release --example kernel_throughput -- [SIZE_BYTES] [SECONDS] [ONLY]`);
//! `flashpipe kernels --measure` prints the same table.

use std::sync::Arc;

use flashpipe_kernels::langid::model::train;
use flashpipe_kernels::langid::udhr::{load_udhr, training_samples, CorpusSelection};
use flashpipe_kernels::throughput::{measure_all, MeasureSettings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let input_bytes = arguments
        .first()
        .map_or(Ok(16 << 20), |text| text.parse())?;
    let minimum_seconds = arguments.get(1).map_or(Ok(0.5), |text| text.parse())?;
    let udhr = flashpipe_kernels::shared_data::optional_shared_folder(env!("CARGO_MANIFEST_DIR"), "udhr")
        .ok_or("the langid row needs the UDHR corpus (scripts/fetch-udhr DIR, then FLASHPIPE_SHARED_DATA=PARENT-OF-DIR with DIR named udhr)")?;
    let documents = load_udhr(&udhr, CorpusSelection::default())?;
    let model = Arc::new(train(&training_samples(&documents), Default::default()));
    let sample = documents
        .iter()
        .flat_map(|document| document.test_text.iter().copied())
        .collect();
    let settings = MeasureSettings {
        input_bytes,
        minimum_seconds,
        langid: Some((model, sample)),
        only: arguments.get(2).cloned(),
        ..MeasureSettings::default()
    };
    println!(
        "| kernel | schedule | 1 core MB/s | 1 core MB/CPU-s | {} cores MB/s | input |",
        settings.worker_count
    );
    println!("| --- | --- | ---: | ---: | ---: | --- |");
    measure_all(&settings, |row| {
        println!(
            "| {} | {:?} | {:.1} | {:.1} | {:.1} | {} |",
            row.kernel,
            row.schedule,
            row.single_core_bytes_per_second / 1e6,
            row.single_core_bytes_per_cpu_second / 1e6,
            row.all_cores_bytes_per_second / 1e6,
            row.input_description
        );
    })?;
    Ok(())
}
