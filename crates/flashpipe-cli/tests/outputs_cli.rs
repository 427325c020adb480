//! Machine-readable and drawn outputs through the binary: `--json` of `ftl precondition`
//! and `ftl emulate` parsed, `--plot` of `ftl copy`, `ftl precondition` and `ftl emulate`
//! written (a missing folder refused), `sim job` mixed and from job files (hostile job
//! files refused), `sim replay --precondition` meeting garbage collection at once, and
//! zero-filled reads kept out of the replay's read latency.

mod common;

use common::{
    check_fails, command_line, disksim_random_writes, flashpipe, fresh_folder, succeed, text,
    TestFolder,
};

fn json_of(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {stdout}"))
}

fn is_png(path: &std::path::Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.len() > 8 && &bytes[1..4] == b"PNG")
}

/// Runs `line` (a command line whose one `{}` is the path of its plot) in a fresh folder
/// named `test`, checks that the plot is a PNG, and returns the JSON printed and the folder.
fn json_and_plot(test: &str, line: &str) -> (serde_json::Value, TestFolder) {
    let folder = fresh_folder(test);
    let png = folder.join("plot.png");
    let json = json_of(&succeed(&command_line(line, &[text(&png)])));
    assert!(is_png(&png), "{line}: no PNG at {}", png.display());
    (json, folder)
}

#[test]
fn precondition_prints_json_and_draws_its_plot() {
    let (json, folder) = json_and_plot(
        "outputs-precondition",
        "ftl precondition --blocks-per-plane 16 --json --plot {}",
    );
    assert_eq!(json["method"], "direct");
    for field in ["logical_pages", "filled_pages"] {
        assert!(json[field].as_u64().unwrap() > 0, "{field}: {json}");
    }
    assert!(json["write_amplification"].as_f64().unwrap() >= 1.0);
    assert!(json["live_pages_per_block_p50"].as_u64().is_some());
    let missing = folder.join("no-such-folder/state.png");
    check_fails(
        &["ftl", "precondition", "--plot", text(&missing)],
        "does not exist",
    );
    assert!(!missing.parent().unwrap().exists(), "no folder was made");
}

#[test]
fn emulate_prints_json_and_draws_its_latency_cdf() {
    let (json, folder) = json_and_plot(
        "outputs-emulate",
        "ftl emulate --seconds 0.2 --blocks-per-plane 8 --json --plot {}",
    );
    assert_eq!(json["pattern"], "randread");
    assert_eq!(json["queue_depth"], 1);
    assert!(json["requests"].as_u64().unwrap() > 0);
    assert!(json["model_latency_us_mean"].as_f64().unwrap() > 0.0);
    assert!(json["kept_up"].is_boolean());
    check_fails(
        &command_line(
            "ftl emulate --seconds 0.1 --plot {}",
            &[text(&folder.join("none/latency.png"))],
        ),
        "does not exist",
    );
}

#[test]
fn ftl_copy_draws_its_plot() {
    let (json, _folder) = json_and_plot("outputs-copy", "ftl copy --size 4MiB --json --plot {}");
    assert!(json["by_reference"]["copy_matches_source"]
        .as_bool()
        .unwrap());
    check_fails(
        &["ftl", "copy", "--size", "4MiB", "--plot", "copy.svg"],
        ".png",
    );
}

#[test]
fn a_mixed_job_reads_and_writes_in_the_asked_shares() {
    let stdout = succeed(&command_line(
        "sim job --rw randrw --rwmixread 70 --requests 2000 \
         --queue-depth 8 --blocks-per-plane 16 --json",
        &[],
    ));
    let json = json_of(&stdout);
    let reads = json["reads"]["count"].as_u64().unwrap();
    let writes = json["writes"]["count"].as_u64().unwrap();
    assert_eq!(reads + writes, 2000, "{json}");
    assert!((1200..=1600).contains(&reads), "70% of 2000 reads: {reads}");
    assert!(json["write_amplification"].as_f64().unwrap() >= 1.0);
    assert!(json["reads"]["latency_us_p50"].as_f64().unwrap() > 0.0);
    check_fails(
        &["sim", "job", "--rw", "randrw", "--rwmixread", "101"],
        "--rwmixread 101",
    );
    check_fails(
        &["sim", "job", "--rw", "randrw", "--hosts", "2"],
        "mixed job",
    );
    check_fails(
        &["sim", "job", "--rw", "randread", "--kind", "write"],
        "--kind",
    );
}

const TWO_JOBS: &str = r#"
seed = 3

[[job]]
name = "mixed"
rw = "randrw"
rwmixread = 70
request_bytes = "8KiB"
queue_depth = 4
requests = 500
blocks_per_plane = 16

[[job]]
name = "reads"
rw = "randread"
request_bytes = 8192
requests = 500
blocks_per_plane = 8
"#;

#[test]
fn a_job_file_runs_its_jobs_in_order() {
    let folder = fresh_folder("outputs-jobfile");
    let file = folder.join("jobs.toml");
    std::fs::write(&file, TWO_JOBS).unwrap();
    let json = json_of(&succeed(&["sim", "job", text(&file), "--json"]));
    let jobs = json.as_array().expect("one entry per job");
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0]["job"]["name"], "mixed");
    assert_eq!(jobs[0]["job"]["seed"], 3, "the file's default seed");
    assert_eq!(jobs[1]["job"]["name"], "reads");
    assert_eq!(jobs[1]["result"]["requests"], 500);
    let table = succeed(&["sim", "job", text(&file)]);
    let mixed_at = table.find("job mixed").expect("the first job's header");
    let reads_at = table.find("job reads").expect("the second job's header");
    assert!(mixed_at < reads_at, "in file order: {table}");
}

#[test]
fn hostile_job_files_are_refused() {
    let folder = fresh_folder("outputs-jobfile-hostile");
    let cases = [
        ("empty.toml", "", "no jobs"),
        (
            "unknown.toml",
            "[[job]]\nname = \"a\"\nrw = \"randread\"\nblocksize = 4\n",
            "unknown field",
        ),
        (
            "badrw.toml",
            "[[job]]\nname = \"a\"\nrw = \"sideways\"\n",
            "unknown variant",
        ),
        (
            "badsize.toml",
            "[[job]]\nname = \"a\"\nrw = \"read\"\nrequest_bytes = \"lots\"\n",
            "request_bytes lots",
        ),
        (
            "zero-depth.toml",
            "[[job]]\nname = \"a\"\nrw = \"read\"\nqueue_depth = 0\n",
            "queue-depth",
        ),
        (
            "twice.toml",
            "[[job]]\nname = \"a\"\nrw = \"read\"\n[[job]]\nname = \"a\"\nrw = \"write\"\n",
            "two jobs are named a",
        ),
        ("garbage.toml", "\u{0}\u{1}not toml [[", "garbage.toml"),
    ];
    for (name, contents, expected) in cases {
        let file = folder.join(name);
        std::fs::write(&file, contents).unwrap();
        check_fails(&["sim", "job", text(&file)], expected);
    }
    check_fails(
        &["sim", "job", text(&folder.join("missing.toml"))],
        "cannot read job file",
    );
    check_fails(&["sim", "job", text(&folder)], "not a regular file");
    let file = folder.join("jobs.toml");
    std::fs::write(&file, TWO_JOBS).unwrap();
    check_fails(&["sim", "job", text(&file), "--rw", "read"], "--rw");
}

/// `count` random 8 KiB writes over the first 512 MiB, 100 us apart (DiskSim, ms).
fn random_write_trace(count: u64) -> String {
    disksim_random_writes(count, 65_536)
}

#[test]
fn a_replay_from_a_preconditioned_state_meets_collection_at_once() {
    let folder = fresh_folder("outputs-replay-precondition");
    let trace = folder.join("writes.disksim");
    std::fs::write(&trace, random_write_trace(400)).unwrap();
    let replay = |extra: &[&str]| {
        let mut arguments = command_line(
            "sim replay --format disksim --blocks-per-plane 16 --json {}",
            &[text(&trace)],
        );
        arguments.extend_from_slice(extra);
        json_of(&succeed(&arguments))
    };
    let fresh = replay(&[]);
    assert_eq!(fresh["result"]["collection"]["gc_pages_copied"], 0);
    let steady = replay(&["--precondition"]);
    let collection = &steady["result"]["collection"];
    assert!(
        collection["gc_victims"].as_u64().unwrap() > 0,
        "no collection after preconditioning: {collection}"
    );
    assert!(collection["write_amplification"].as_f64().unwrap() > 1.0);
    let precondition = &steady["configuration"]["precondition"];
    assert!(precondition["filled_pages"].as_u64().unwrap() > 0);
    assert!(precondition["write_amplification"].as_f64().unwrap() >= 1.0);
    assert!(steady["configuration"]["command"]
        .as_str()
        .unwrap()
        .contains("--precondition"));
    let table = succeed(&command_line(
        "sim replay --format disksim --blocks-per-plane 16 --precondition {}",
        &[text(&trace)],
    ));
    assert!(table.contains("preconditioned"), "{table}");
    check_fails(
        &command_line(
            "sim replay --format disksim --mode raw-striped --precondition {}",
            &[text(&trace)],
        ),
        "--precondition",
    );
    check_fails(
        &command_line(
            "sim replay --format disksim --precondition --precondition-fill 1.5 {}",
            &[text(&trace)],
        ),
        "--precondition-fill 1.5",
    );
}

/// Reads of never-written pages are answered with zeros at once: counted apart, not in the
/// read latency, so the read p50 is a flash read's and not 0 us.
#[test]
fn zero_filled_reads_stay_out_of_the_read_latency() {
    let folder = fresh_folder("outputs-replay-unwritten");
    let trace = folder.join("mixed.disksim");
    let mut lines = String::new();
    for index in 0..50u64 {
        // A read of a preconditioned page (on flash), then one past the filled share
        // (never written: 180,000 of 189,158 logical pages, 90% filled).
        let at = index as f64 * 0.2;
        lines.push_str(&format!(
            "{at:.3} 0 {} 16 1
",
            index * 16
        ));
        lines.push_str(&format!(
            "{:.3} 0 {} 16 1
",
            at + 0.1,
            (180_000 + index) * 16
        ));
    }
    std::fs::write(&trace, lines).unwrap();
    let output = flashpipe(&command_line(
        "sim replay --format disksim --blocks-per-plane 16 --precondition --json {}",
        &[text(&trace)],
    ));
    assert!(output.status.success());
    let json = json_of(&String::from_utf8_lossy(&output.stdout));
    let result = &json["result"];
    assert_eq!(result["zero_filled_reads"], 50);
    assert_eq!(result["reads"]["count"], 50, "the reads that went to flash");
    assert!(
        result["reads"]["latency_us_p50"].as_f64().unwrap() > 10.0,
        "the read p50 is a flash read's: {result}"
    );
    let table = succeed(&command_line(
        "sim replay --format disksim --blocks-per-plane 16 --precondition {}",
        &[text(&trace)],
    ));
    let read_row: Vec<&str> = table
        .lines()
        .find(|line| line.starts_with("read "))
        .expect("the read row")
        .split_whitespace()
        .collect();
    let read_p50: f64 = read_row[5].parse().expect("a read p50");
    assert!(read_p50 > 10.0, "the table's read p50: {table}");
    assert!(table.contains("50 of them read nothing else"), "{table}");
}
