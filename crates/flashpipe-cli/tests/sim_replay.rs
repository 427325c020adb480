//! End-to-end tests of `flashpipe sim replay` (issue #16) on a small device: a random-write
//! trace replays through the FTL with no failed write and garbage collection in its
//! results, the raw-striped mode on the same trace fails loudly (non-zero exit), the same
//! seed and trace print the same JSON, and implausible or unordered traces are refused
//! with their line.

mod common;

use std::path::{Path, PathBuf};

use common::{command_line, disksim_random_writes, outcome};

/// A folder of its own for one test, removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new(name: &str) -> Folder {
        let path = std::env::temp_dir().join(format!(
            "flashpipe-sim-replay-{name}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Folder(path)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// minflash's timing on 2 x 2 dies of 16 blocks of 32 pages (16 MiB).
fn small_preset(folder: &Folder) -> String {
    let preset =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../flashpipe-flash/presets/minflash.toml");
    let text = std::fs::read_to_string(preset).unwrap();
    let small: String = text
        .lines()
        .map(|line| {
            let key = line.split('=').next().unwrap_or("").trim();
            match key {
                "name" => "name = \"small\"".to_string(),
                "channels" => "channels = 2".to_string(),
                "ways" => "ways = 2".to_string(),
                "blocks_per_plane" => "blocks_per_plane = 16".to_string(),
                "pages_per_block" => "pages_per_block = 32".to_string(),
                _ => line.to_string(),
            }
        })
        .map(|line| line + "\n")
        .collect();
    folder.file("small.toml", &small)
}

/// `count` random 8 KiB writes over the first 12 MiB, 100 us apart (DiskSim, ms).
fn random_write_trace(count: u64) -> String {
    disksim_random_writes(count, 1536)
}

#[test]
fn random_writes_replay_through_the_ftl_with_collection_and_no_failure() {
    let folder = Folder::new("ftl");
    let preset = small_preset(&folder);
    let trace = folder.file("writes.disksim", &random_write_trace(5000));
    let arguments = [
        "sim", "replay", "--format", "disksim", "--preset", &preset, "--json", &trace,
    ];
    let (success, stdout, stderr) = outcome(&arguments);
    assert!(success, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let result = &json["result"];
    assert_eq!(result["writes"]["count"], 5000);
    assert_eq!(result["writes"]["failed"], 0);
    assert_eq!(result["rejected_requests"], 0);
    assert!(
        result["collection"]["gc_victims"].as_u64().unwrap() > 0,
        "{result}"
    );
    assert!(
        result["collection"]["write_amplification"]
            .as_f64()
            .unwrap()
            > 1.0
    );
    assert_eq!(json["configuration"]["seed"], 1);
    assert_eq!(json["configuration"]["mode"], "ftl");
    let (_, again, _) = outcome(&arguments);
    assert_eq!(stdout, again, "same seed and trace, same output");
    let (success, _, stderr) = outcome(&command_line(
        "sim replay --format disksim --preset {} --mode raw-striped {}",
        &[&preset, &trace],
    ));
    assert!(!success, "the raw-striped mode fails random writes loudly");
    assert!(stderr.contains("page operations failed"), "{stderr}");
}

#[test]
fn bad_traces_are_refused_with_their_line() {
    let folder = Folder::new("bad");
    for (name, text, options, expected) in [
        (
            "backwards",
            &"# t d b s f\n1.0 0 0 8 1\n0.5 0 8 8 1\n".to_string(),
            &[][..],
            ":3: arrival time 500000 ns goes backwards",
        ),
        (
            "nanoseconds",
            &"0 0 0 8 1\n100000000 0 8 8 1\n".to_string(),
            &[][..],
            "above the plausible 86400 s",
        ),
        (
            "long line",
            &format!("0 0 0 8 1\n{}\n", "7".repeat(70_000)),
            &[][..],
            ":2: a line longer than 65536 bytes",
        ),
        (
            "unit",
            &"0 0 0 8 1\n".to_string(),
            &["--time-unit", "ns", "--format", "ascii-ns"][..],
            "--time-unit applies to --format disksim only",
        ),
    ] {
        let trace = folder.file(name, text);
        let mut arguments = vec!["sim", "replay", &trace];
        if !options.contains(&"--format") {
            arguments.extend(["--format", "disksim"]);
        }
        arguments.extend(options);
        let (success, _, stderr) = outcome(&arguments);
        assert!(!success, "{name}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let binary = folder.0.join("binary.disksim");
    std::fs::write(&binary, b"0 0 0 8 1\n\xff\xfe 0 8 8 1\n").unwrap();
    let (success, _, stderr) = outcome(&[
        "sim",
        "replay",
        binary.to_str().unwrap(),
        "--format",
        "disksim",
    ]);
    assert!(!success);
    assert!(stderr.contains(":2: not UTF-8 text"), "{stderr}");
}

#[test]
fn plot_draws_the_latency_cdf_and_the_throughput() {
    let folder = Folder::new("plot");
    let preset = small_preset(&folder);
    let trace = folder.file("writes.disksim", &random_write_trace(200));
    let plots = folder.0.join("plots");
    let (success, stdout, stderr) = outcome(&command_line(
        "sim replay --format disksim --preset {} --speed 2x --plot {} {}",
        &[&preset, plots.to_str().unwrap(), &trace],
    ));
    assert!(success, "{stderr}");
    assert!(stdout.contains("--speed 2x"), "{stdout}");
    for name in ["latency-cdf.png", "throughput.png"] {
        let bytes = std::fs::read(plots.join(name)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{name}");
    }
}
