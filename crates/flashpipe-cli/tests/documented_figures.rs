//! The figures docs/reproductions.md states as current, checked on every run of the suite.
//!
//! Every command here runs in the flash model's virtual time, so its figures are the same
//! on every machine and every run: a figure that changes is a change of the model, the FTL
//! or the file system, and the documentation must change with it. Each test runs one
//! command through the real binary with `--json` and compares every number with the copy
//! kept in `docs/figures/` (the figures the document's tables print), except wall-clock
//! fields. When a change is intended: update docs/reproductions.md, then re-run with
//! `FLASHPIPE_BLESS=1` to rewrite the copies, and commit both.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// Relative difference two numbers may have and still be the same figure (the model is
/// deterministic; this absorbs only the last digit of float printing).
const RELATIVE_TOLERANCE: f64 = 1e-9;

fn figures_folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/figures")
}

/// Runs `flashpipe ARGUMENTS --json` and checks its output against `docs/figures/NAME.json`.
fn check_figures(name: &str, arguments: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(arguments)
        .arg("--json")
        .output()
        .expect("run flashpipe");
    assert!(
        output.status.success(),
        "flashpipe {} failed: {}",
        arguments.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let now: Value = serde_json::from_slice(&output.stdout).expect("the command prints JSON");
    let path = figures_folder().join(format!("{name}.json"));
    if std::env::var_os("FLASHPIPE_BLESS").is_some_and(|value| value == "1") {
        let text = serde_json::to_string_pretty(&now).expect("encode") + "\n";
        std::fs::write(&path, text).expect("write the figures");
        return;
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let documented: Value = serde_json::from_str(&text).expect("the kept figures are JSON");
    let mut differences = Vec::new();
    compare(&documented, &now, name, &mut differences);
    assert!(
        differences.is_empty(),
        "flashpipe {} no longer gives the documented figures:\n  {}\n\
         If the change is intended, update docs/reproductions.md and re-run with \
         FLASHPIPE_BLESS=1 to rewrite {}.",
        arguments.join(" "),
        differences.join("\n  "),
        path.display()
    );
}

/// Whether a field measures wall-clock time (machine-dependent, never compared).
fn is_wall_clock(key: &str) -> bool {
    key.starts_with("wall")
}

fn same_number(documented: f64, now: f64) -> bool {
    let scale = documented.abs().max(now.abs()).max(f64::MIN_POSITIVE);
    (documented - now).abs() / scale <= RELATIVE_TOLERANCE
}

fn compare(documented: &Value, now: &Value, at: &str, differences: &mut Vec<String>) {
    match (documented, now) {
        (Value::Object(documented), Value::Object(now)) => {
            for (key, value) in documented {
                if is_wall_clock(key) {
                    continue;
                }
                match now.get(key) {
                    Some(current) => compare(value, current, &format!("{at}.{key}"), differences),
                    None => differences.push(format!("{at}.{key}: documented, now missing")),
                }
            }
            for key in now.keys().filter(|key| !documented.contains_key(*key)) {
                if !is_wall_clock(key) {
                    differences.push(format!("{at}.{key}: new, not documented"));
                }
            }
        }
        (Value::Array(documented), Value::Array(now)) => {
            if documented.len() != now.len() {
                differences.push(format!(
                    "{at}: {} rows documented, {} now",
                    documented.len(),
                    now.len()
                ));
            }
            for (index, (old, new)) in documented.iter().zip(now).enumerate() {
                compare(old, new, &format!("{at}[{index}]"), differences);
            }
        }
        (Value::Number(old), Value::Number(new)) => {
            let (old, new) = (old.as_f64().unwrap_or(0.0), new.as_f64().unwrap_or(0.0));
            if !same_number(old, new) {
                differences.push(format!("{at}: was {old}, now {new}"));
            }
        }
        (old, new) if old != new => differences.push(format!("{at}: was {old}, now {new}")),
        _ => {}
    }
}

#[test]
fn rad_fig4() {
    check_figures("repro-rad-fig4", &["sim", "repro", "rad-fig4"]);
}

#[test]
fn rad_fig4_through_the_ftl() {
    check_figures("repro-rad-fig4-ftl", &["sim", "repro", "rad-fig4-ftl"]);
}

#[test]
fn rad_table2() {
    check_figures("repro-rad-table2", &["sim", "repro", "rad-table2"]);
}

#[test]
fn minflash_table1() {
    check_figures(
        "repro-minflash-table1",
        &["sim", "repro", "minflash-table1"],
    );
}

#[test]
fn minflash_fig5() {
    check_figures("repro-minflash-fig5", &["sim", "repro", "minflash-fig5"]);
}

#[test]
fn minflash_fig6() {
    check_figures("repro-minflash-fig6", &["sim", "repro", "minflash-fig6"]);
}

#[test]
fn minflash_fig7() {
    check_figures("repro-minflash-fig7", &["sim", "repro", "minflash-fig7"]);
}

#[test]
fn ftl_write_amplification() {
    check_figures("ftl-wa", &["ftl", "wa"]);
}

#[test]
fn ftl_hot_and_cold() {
    check_figures("ftl-hotcold", &["ftl", "hotcold"]);
}

#[test]
fn ftl_wear() {
    let arguments = [
        "ftl",
        "wear",
        "--device-writes",
        "50",
        "--blocks-per-chip",
        "32",
        "--pages-per-block",
        "32",
    ];
    check_figures("ftl-wear", &arguments);
}

#[test]
fn ftl_gc_wait() {
    check_figures("ftl-gc-wait", &["ftl", "gc-wait"]);
}

#[test]
fn ftl_copy_by_reference() {
    check_figures("ftl-copy", &["ftl", "copy", "--size", "1GiB"]);
}
