//! `flashpipe bench chart` through the binary: panel files drawn into one PNG, a refused
//! chart (missing file, bad number, too many points, unwritable path) failing with its
//! kind's exit status and writing nothing, and `scripts/bench-ycsb --replot` drawing
//! Fig. 8's panels from a run's summary and go-ycsb's 5 s lines.

mod common;

use std::path::Path;
use std::process::Command;

use common::{flashpipe, fresh_folder, succeed, text};

const THROUGHPUT: &str = "title\t(a) Throughput\nx_label\ttime (s)\ny_label\tupdates/s\n\
                          series\tx\ty\next4-nbd\t5\t900\next4-nbd\t10\t950\n";
const RATE: &str = "title\t(b) Rate\nx_label\tphase\ny_label\tupdates/s\nkind\tbars\n\
                    series\tx\ty\next4-nbd\trun\t911\nfs-nbd\trun\t392.4\n";

fn write(folder: &Path, name: &str, contents: &str) -> String {
    let path = folder.join(name);
    std::fs::write(&path, contents).unwrap();
    text(&path).to_string()
}

/// The PNG's width and height from its header chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[1..4], b"PNG", "{} is not a PNG", path.display());
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

#[test]
fn panels_are_drawn_side_by_side() {
    let folder = fresh_folder("bench-chart-draws");
    let (a, b) = (
        write(&folder, "a.tsv", THROUGHPUT),
        write(&folder, "b.tsv", RATE),
    );
    let png = folder.join("fig.png");
    let printed = succeed(&[
        "bench",
        "chart",
        "--panel",
        &a,
        "--panel",
        &b,
        "--plot",
        text(&png),
    ]);
    assert!(printed.contains("2 panels"), "{printed}");
    assert_eq!(png_size(&png), (1800, 560));
    let plot = text(&png);
    let json = succeed(&["bench", "chart", "--panel", &a, "--plot", plot, "--json"]);
    let written: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (written["plot"].as_str(), written["panels"].as_u64()),
        (Some(plot), Some(1))
    );
}

#[test]
fn a_refused_chart_exits_with_its_kind_and_writes_nothing() {
    let folder = fresh_folder("bench-chart-refused");
    let good = write(&folder, "good.tsv", THROUGHPUT);
    let bad = write(&folder, "bad.tsv", &THROUGHPUT.replace("950", "9,5"));
    let points: String = (0..10_001).map(|x| format!("a\t{x}\t1\n")).collect();
    let many = write(
        &folder,
        "many.tsv",
        &format!(
            "{}{points}",
            &THROUGHPUT[..THROUGHPUT.find("ext4").unwrap()]
        ),
    );
    let missing = text(&folder.join("missing.tsv")).to_string();
    let png = folder.join("fig.png");
    let unwritable = folder.join("no-folder").join("fig.png");
    let cases: [(&str, &Path, i32, &str); 4] = [
        (&bad, &png, 64, "line 6: the y `9,5` is not a finite number"),
        (&many, &png, 64, "more than 10000 points"),
        (&missing, &png, 66, "cannot open the panel"),
        (&good, &unwritable, 66, "no-folder does not exist"),
    ];
    for (panel, plot, status, message) in cases {
        let output = flashpipe(&[
            "bench",
            "chart",
            "--panel",
            &good,
            "--panel",
            panel,
            "--plot",
            text(plot),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(status), "{stderr}");
        assert!(
            stderr.contains(message) && !stderr.contains("panicked"),
            "{stderr}"
        );
        assert!(!plot.exists(), "a refused chart wrote {}", plot.display());
    }
    let output = flashpipe(&[
        "bench",
        "chart",
        "--panel",
        &bad,
        "--plot",
        text(&png),
        "--json",
    ]);
    let error: serde_json::Value = serde_json::from_slice(&output.stderr).unwrap();
    assert_eq!(error["kind"], "invalid_input", "{error}");
}

/// A run's folder as scripts/bench-ycsb leaves it: the summary and each stack's run log.
fn fake_run(folder: &Path) {
    let header = "stack\tphase\toperations\tops_per_s\tmean_us\tp99_us\tpages_programmed_per_op\tgc_pages_per_op\tflash_reads_per_op\n";
    let rows = "ext4-nbd\tload\t100\t500\t2000\t4000\t3\t0\t1\n\
                ext4-nbd\trun\t2000\t400\t2500\t5000\t2.43\t0.00\t1.60\n\
                flash-aware\trun\t2000\t800\t1200\t3000\t1.10\t-\t0.90\n";
    std::fs::write(folder.join("summary.tsv"), format!("{header}{rows}")).unwrap();
    let line = |seconds: f64, count: u32| {
        format!(
            "TOTAL  - Takes(s): {seconds:.1}, Count: {count}, OPS: 1.0, Avg(us): 1, 99th(us): 1\n"
        )
    };
    for (stack, lines) in [
        ("ext4-nbd", [line(5.0, 2000), line(5.2, 2000)].concat()),
        (
            "flash-aware",
            [line(1.0, 800), line(2.0, 2000), line(2.5, 2000)].concat(),
        ),
    ] {
        std::fs::create_dir_all(folder.join(stack)).unwrap();
        std::fs::write(folder.join(stack).join("ycsb-run.log"), lines).unwrap();
    }
}

#[test]
fn bench_ycsb_replot_draws_the_run_under_its_out_folder() {
    let folder = fresh_folder("bench-chart-ycsb");
    fake_run(&folder);
    let png = folder.join("fig8.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench-ycsb");
    let output = Command::new("bash")
        .arg(&script)
        .args(["--replot", "--out", text(&folder), "--plot", text(&png)])
        .args(["--flashpipe", env!("CARGO_BIN_EXE_flashpipe")])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(png_size(&png), (1800, 1120));
    let throughput = std::fs::read_to_string(folder.join("plot/throughput.tsv")).unwrap();
    let rows: Vec<&str> = throughput.lines().skip(5).collect();
    assert_eq!(
        rows,
        [
            "ext4-nbd\t5.0\t400.0",
            "flash-aware\t1.0\t800.0",
            "flash-aware\t2.0\t1200.0"
        ]
    );
    let pages = std::fs::read_to_string(folder.join("plot/pages.tsv")).unwrap();
    assert!(
        pages.contains("flash-aware\tread\t0.90") && !pages.contains("flash-aware\tmoved"),
        "{pages}"
    );
}
