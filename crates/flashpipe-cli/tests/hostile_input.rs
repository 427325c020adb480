//! The standing hostile-input suite (issue #10, items 8 and 9): a table of bad inputs run
//! through the `flashpipe` binary: trace lines (blkparse, DiskSim), preset fields, simulator
//! job options, store-file fields, names, kernel options and `run` options. Each case writes
//! its files first, runs one command, and expects a non-zero exit status, a message on
//! standard error holding the expected words (the field, the line, the limit), no panic and
//! no abort. Cases against a store also check that every file of the store folder (store
//! file, images) is byte-identical afterwards.
//!
//! Every case's standard error is printed, so `cargo test --test hostile_input -- --nocapture
//! | grep -n panicked` is a check of its own (it must print nothing).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{command_line, fresh_folder};

/// The minflash preset, the base every preset case edits one line of.
const MINFLASH_PRESET: &str = include_str!("../../flashpipe-flash/presets/minflash.toml");

/// i64::MAX, the largest integer TOML can write.
const I64_MAX: &str = "9223372036854775807";

/// A file a case writes before it runs.
enum CaseFile {
    /// A regular file with this text.
    Text(String),
    /// A named pipe (FIFO): reading it would block forever.
    Fifo,
    /// A folder.
    Folder,
}

/// One hostile input.
struct Case {
    /// Names the case in failures.
    name: String,
    /// Files written first, in the case's folder (or the store folder for store cases).
    files: Vec<(String, CaseFile)>,
    /// The command line after `flashpipe`.
    arguments: Vec<String>,
    /// Words the standard error must hold (case-sensitive).
    expected: Vec<String>,
    /// Runs in the shared store's folder, whose files must not change.
    against_store: bool,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

fn case(name: &str, arguments: &[&str], expected: &[&str]) -> Case {
    Case {
        name: name.to_string(),
        files: Vec::new(),
        arguments: strings(arguments),
        expected: strings(expected),
        against_store: false,
    }
}

fn with_file(mut case: Case, name: &str, file: CaseFile) -> Case {
    case.files.push((name.to_string(), file));
    case
}

fn on_store(mut case: Case) -> Case {
    case.against_store = true;
    case
}

/// The minflash preset with the line setting `field` replaced by `field = value`.
fn preset_with(field: &str, value: &str) -> String {
    let mut replaced = false;
    let lines: Vec<String> = MINFLASH_PRESET
        .lines()
        .map(|line| {
            let setting = line
                .split_once('=')
                .is_some_and(|(key, _)| key.trim() == field);
            if setting && !replaced {
                replaced = true;
                format!("{field} = {value}")
            } else {
                line.to_string()
            }
        })
        .collect();
    assert!(replaced, "the minflash preset sets {field}");
    lines.join("\n") + "\n"
}

/// The 1-based line of `field` in the minflash preset.
fn preset_line(field: &str) -> usize {
    MINFLASH_PRESET
        .lines()
        .position(|line| {
            line.split_once('=')
                .is_some_and(|(key, _)| key.trim() == field)
        })
        .expect("the preset sets the field")
        + 1
}

/// `sim job` on a preset whose `field` is `value`; the error names the file, the line and
/// the field.
fn preset_case(field: &str, value: &str, also_expected: &[&str]) -> Case {
    let line = format!("p.toml:{}", preset_line(field));
    let mut expected = vec![line.as_str(), field];
    expected.extend_from_slice(also_expected);
    with_file(
        case(
            &format!("preset {field} = {value}"),
            &["sim", "job", "--preset", "p.toml", "--requests", "1"],
            &expected,
        ),
        "p.toml",
        CaseFile::Text(preset_with(field, value)),
    )
}

fn preset_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for field in [
        "devices",
        "channels",
        "ways",
        "dies",
        "planes",
        "blocks_per_plane",
        "pages_per_block",
        "controller_queue_depth",
    ] {
        cases.push(preset_case(field, "0", &["within"]));
        cases.push(preset_case(field, "4000000000", &["within"]));
    }
    for value in ["0", "1000", "1048576", "4294967295"] {
        cases.push(preset_case("page_data_bytes", value, &["power of two"]));
    }
    cases.push(preset_case("page_spare_bytes", "0", &["parity"]));
    cases.push(preset_case("page_spare_bytes", "100000", &["limit"]));
    for field in [
        "command_address_ns",
        "array_read_ns",
        "page_transfer_ns",
        "program_ns_max",
        "erase_ns",
        "ecc_decode_ns",
        "ecc_decode_ns_per_symbol_error",
        "ecc_encode_ns",
        "host_software_read_ns",
        "host_software_write_ns",
        "hop_ns",
    ] {
        cases.push(preset_case(field, I64_MAX, &["limit of 10000000000 ns"]));
    }
    cases.push(preset_case("erase_ns", "-1", &[]));
    cases.push(preset_case("erase_ns", "1.5", &[]));
    cases.push(preset_case(
        "program_ns_by_page_type",
        &format!("[{I64_MAX}]"),
        &["limit"],
    ));
    cases.push(preset_case(
        "program_ns_by_page_type",
        "[]",
        &["page types"],
    ));
    cases.push(preset_case(
        "program_ns_by_page_type",
        "[1, 2, 3, 4, 5, 6, 7, 8, 9]",
        &["page types"],
    ));
    cases.push(preset_case("host_link_bytes_per_second", "0", &["within"]));
    cases.push(preset_case(
        "host_link_bytes_per_second",
        I64_MAX,
        &["within"],
    ));
    for value in ["nan", "inf", "-0.5", "1.5"] {
        cases.push(preset_case("program_slow_fraction", value, &["within"]));
    }
    cases.push(preset_case("rated_pe_cycles", "0", &["within"]));
    cases.push(preset_case("rated_pe_cycles", "4000000000", &["within"]));
    for field in [
        "base_rber",
        "wear_rber_at_rated",
        "retention_rber_per_hour",
        "read_disturb_rber_per_read",
        "factory_bad_block_fraction",
        "grown_bad_probability_at_rated",
    ] {
        cases.push(preset_case(field, "nan", &["within"]));
        cases.push(preset_case(field, "2.0", &["within"]));
    }
    for field in ["wear_exponent", "grown_bad_exponent"] {
        cases.push(preset_case(field, "nan", &["within"]));
        cases.push(preset_case(field, "1e300", &["within"]));
        cases.push(preset_case(field, "-1.0", &["within"]));
    }
    cases.extend(preset_product_cases());
    cases.extend(preset_file_cases());
    cases
}

/// Every field within its own limit, their product beyond the model's.
fn preset_product_cases() -> Vec<Case> {
    let many_dies = preset_with("channels", "64").replace("ways = 8 ", "ways = 64 ");
    let many_dies = many_dies.replace("devices = 1 ", "devices = 64 ");
    let many_blocks = preset_with("blocks_per_plane", "1048576");
    vec![
        with_file(
            case(
                "preset: 64 x 64 x 64 dies",
                &["sim", "job", "--preset", "p.toml", "--requests", "1"],
                &["p.toml:", "dies", "limit"],
            ),
            "p.toml",
            CaseFile::Text(many_dies),
        ),
        with_file(
            case(
                "preset: 2^20 blocks per plane x 64 chips",
                &["sim", "job", "--preset", "p.toml", "--requests", "1"],
                &["p.toml:", "blocks_per_plane", "limit"],
            ),
            "p.toml",
            CaseFile::Text(many_blocks),
        ),
    ]
}

fn preset_file_cases() -> Vec<Case> {
    let job = ["sim", "job", "--preset", "p.toml", "--requests", "1"];
    vec![
        with_file(
            case("preset: unknown field", &job, &["p.toml:", "unknown field"]),
            "p.toml",
            CaseFile::Text(format!("{MINFLASH_PRESET}\nbogus = 1\n")),
        ),
        with_file(
            case("preset: missing field", &job, &["p.toml:", "hop_ns"]),
            "p.toml",
            CaseFile::Text(
                MINFLASH_PRESET
                    .lines()
                    .filter(|line| !line.starts_with("hop_ns"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        ),
        with_file(
            case("preset: not TOML", &job, &["p.toml:"]),
            "p.toml",
            CaseFile::Text("[[[ not toml\n".to_string()),
        ),
        with_file(
            case("preset: empty file", &job, &["p.toml"]),
            "p.toml",
            CaseFile::Text(String::new()),
        ),
        with_file(
            case("preset: a folder", &job, &["p.toml", "not a regular file"]),
            "p.toml",
            CaseFile::Folder,
        ),
        with_file(
            case("preset: a FIFO", &job, &["p.toml", "not a regular file"]),
            "p.toml",
            CaseFile::Fifo,
        ),
        case("preset: missing file", &job, &["p.toml"]),
        case(
            "preset: unknown name",
            &["sim", "job", "--preset", "", "--requests", "1"],
            &["cannot read"],
        ),
    ]
}

/// `sim replay` of a one-line trace (or several lines) in `format`.
fn trace_case(format: &str, lines: &str, expected: &[&str]) -> Case {
    with_file(
        case(
            &format!("{format} trace {lines:?}"),
            &["sim", "replay", "--format", format, "t.trace"],
            expected,
        ),
        "t.trace",
        CaseFile::Text(lines.to_string()),
    )
}

/// A blkparse queue event with these time, sector and count fields.
fn blkparse_line(time: &str, sector: &str, count: &str) -> String {
    format!("  8,0    1        1 {time}  4242  Q   R {sector} + {count} [fio]\n")
}

fn blkparse_cases() -> Vec<Case> {
    let good = blkparse_line("0.000000000", "0", "8");
    let mut cases = Vec::new();
    for time in ["1e300", "inf", "-inf", "-1", "NaN", "nan", "1e10"] {
        cases.push(trace_case(
            "blkparse",
            &blkparse_line(time, "0", "8"),
            &["t.trace:1", "time"],
        ));
    }
    cases.push(trace_case(
        "blkparse",
        &blkparse_line("abc", "0", "8"),
        &["t.trace:1", "time", "not a number"],
    ));
    for sector in ["36028797018963968", "18446744073709551615", "2199023255553"] {
        cases.push(trace_case(
            "blkparse",
            &blkparse_line("0.1", sector, "8"),
            &["t.trace:1", "sector", "limit"],
        ));
    }
    for sector in ["18446744073709551616", "-5", "abc", "1.5"] {
        cases.push(trace_case(
            "blkparse",
            &blkparse_line("0.1", sector, "8"),
            &["t.trace:1", "sector"],
        ));
    }
    for count in ["1099511627776", "524289", "36028797018963968"] {
        cases.push(trace_case(
            "blkparse",
            &blkparse_line("0.1", "0", count),
            &["t.trace:1", "sector count", "limit"],
        ));
    }
    for count in ["-1", "1e3"] {
        cases.push(trace_case(
            "blkparse",
            &blkparse_line("0.1", "0", count),
            &["t.trace:1", "sector count"],
        ));
    }
    cases.push(trace_case(
        "blkparse",
        &format!("{good}{good}{}", blkparse_line("inf", "0", "8")),
        &["t.trace:3", "time"],
    ));
    cases.push(trace_case(
        "blkparse",
        "  8,0    1        1 0.1  4242  Q   R 0 8 [fio]\n",
        &["t.trace:1", "sector + count"],
    ));
    cases.push(trace_case(
        "blkparse",
        "  8,0    1        1 0.1\n",
        &["t.trace:1", "7 fields"],
    ));
    cases.push(trace_case(
        "blkparse",
        "garbage line\n",
        &["t.trace:1", "not a blkparse event line"],
    ));
    cases
}

fn disksim_cases() -> Vec<Case> {
    let mut cases = vec![trace_case(
        "disksim",
        "0.0 0 0 2147483648 0\n",
        &["t.trace:1", "size", "limit"],
    )];
    for time in ["inf", "nan", "-1", "1e300", "3e12", "x"] {
        cases.push(trace_case(
            "disksim",
            &format!("{time} 0 0 8 1\n"),
            &["t.trace:1", "arrival time"],
        ));
    }
    for block in ["36028797018963968", "18446744073709551615"] {
        cases.push(trace_case(
            "disksim",
            &format!("0.0 0 {block} 8 1\n"),
            &["t.trace:1", "block", "limit"],
        ));
    }
    for (line, field) in [
        ("0.0 0 18446744073709551616 8 1\n", "block"),
        ("0.0 0 0 -1 1\n", "size"),
        ("0.0 0 0 8 abc\n", "flags"),
        ("0.0 -1 0 8 1\n", "device"),
    ] {
        cases.push(trace_case("disksim", line, &["t.trace:1", field]));
    }
    cases.push(trace_case(
        "disksim",
        "0.0 0 0 8\n",
        &["t.trace:1", "5 fields"],
    ));
    cases.push(trace_case(
        "disksim",
        "0.0 0 0 8 1 9\n",
        &["t.trace:1", "5 fields"],
    ));
    cases.push(trace_case(
        "disksim",
        "0.0 0 0 8 1\n\n1.0 0 0 1099511627776 1\n",
        &["t.trace:3", "size"],
    ));
    let replay = ["sim", "replay", "--format", "disksim", "t.trace"];
    cases.push(with_file(
        case("trace: a FIFO", &replay, &["t.trace", "not a regular file"]),
        "t.trace",
        CaseFile::Fifo,
    ));
    cases.push(with_file(
        case(
            "trace: a folder",
            &replay,
            &["t.trace", "not a regular file"],
        ),
        "t.trace",
        CaseFile::Folder,
    ));
    cases.push(case("trace: missing", &replay, &["t.trace"]));
    cases.push(with_file(
        case(
            "replay: queue depth 0",
            &command_line("sim replay --format disksim --queue-depth 0 t.trace", &[]),
            &["--queue-depth", "within"],
        ),
        "t.trace",
        CaseFile::Text("0.0 0 0 8 1\n".to_string()),
    ));
    cases
}

fn sim_job_cases() -> Vec<Case> {
    let job = |options: &[&str], expected: &[&str]| {
        let mut arguments = vec!["sim", "job"];
        arguments.extend_from_slice(options);
        case(&format!("sim job {options:?}"), &arguments, expected)
    };
    vec![
        job(
            &["--request-bytes", "1099511627776"],
            &["request-bytes", "268435456"],
        ),
        job(&["--request-bytes", "0"], &["request-bytes", "within"]),
        job(&["--request-bytes", "-1"], &["-1"]),
        job(&["--queue-depth", "0"], &["queue-depth", "within"]),
        job(&["--queue-depth", "4097"], &["queue-depth", "4096"]),
        job(&["--queue-depth", "4294967295"], &["queue-depth", "4096"]),
        job(&["--hosts", "0"], &["hosts", "within"]),
        job(&["--hosts", "100000"], &["hosts", "1024"]),
        job(&["--devices", "0"], &["devices", "within"]),
        job(&["--devices", "2"], &["devices", "1..=1"]),
        job(
            &["--requests", "18446744073709551615"],
            &["requests", "4294967296"],
        ),
        job(
            &["--requests", "5000000000", "--request-bytes", "65536"],
            &["requests", "4294967296"],
        ),
        job(&["--preset", "nosuch"], &["nosuch"]),
        case(
            "sim speed queue depth 0",
            &["sim", "speed", "--queue-depth", "0"],
            &["queue-depth", "within"],
        ),
        case(
            "sim speed queue depth 10^6",
            &["sim", "speed", "--queue-depth", "1000000"],
            &["queue-depth", "within"],
        ),
        case(
            "sim speed 2^64-1 operations",
            &["sim", "speed", "--operations", "18446744073709551615"],
            &["operations", "4294967296"],
        ),
    ]
}

/// A store file over the shared store's image `a.img` with one field set to `value`.
fn store_file_with(overrides: &[(&str, &str)], devices: &str) -> String {
    let mut fields = BTreeMap::from([
        ("store_file_version", "1"),
        ("block_size_bytes", "16384"),
        ("stripe_unit_bytes", "65536"),
        ("queue_depth", "32"),
    ]);
    for (field, value) in overrides {
        fields.insert(field, value);
    }
    let mut text = String::new();
    for (field, value) in fields {
        text.push_str(&format!("{field} = {value}\n"));
    }
    text + devices
}

const IMAGE_DEVICE: &str = "[[devices]]\nkind = \"file\"\npath = \"a.img\"\nsize_bytes = 4194304\n";

/// `ls` on a store file `bad.toml` beside the shared store, over its image.
fn store_file_case(name: &str, text: String, expected: &[&str]) -> Case {
    let mut expected_words = vec!["bad.toml"];
    expected_words.extend_from_slice(expected);
    on_store(with_file(
        case(
            &format!("store file: {name}"),
            &["ls", "bad.toml"],
            &expected_words,
        ),
        "bad.toml",
        CaseFile::Text(text),
    ))
}

fn store_field_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (field, value, expected) in [
        ("store_file_version", "0", "store_file_version"),
        ("store_file_version", "3", "version"),
        ("store_file_version", "-1", "store_file_version"),
        ("block_size_bytes", "0", "block size"),
        ("block_size_bytes", "1000", "block size"),
        ("block_size_bytes", "1073741824", "1 MiB"),
        ("block_size_bytes", "4294967295", "block size"),
        ("block_size_bytes", "4294967296", "block_size_bytes"),
        ("stripe_unit_bytes", "0", "stripe unit"),
        ("stripe_unit_bytes", "100", "stripe unit"),
        ("stripe_unit_bytes", "1099511627776", "1 GiB"),
        ("stripe_unit_bytes", I64_MAX, "stripe unit"),
        ("queue_depth", "0", "queue_depth"),
        ("queue_depth", "4097", "4096"),
        ("queue_depth", "1e9", "queue_depth"),
    ] {
        cases.push(store_file_case(
            &format!("{field} = {value}"),
            store_file_with(&[(field, value)], IMAGE_DEVICE),
            &[expected],
        ));
    }
    let file_device = |size: &str| {
        format!("[[devices]]\nkind = \"file\"\npath = \"a.img\"\nsize_bytes = {size}\n")
    };
    for (size, expected) in [
        ("0", "stripe unit"),
        ("1000", "4 KiB"),
        ("2305843009213693952", "limit"),
        (I64_MAX, "limit"),
        ("-4096", "-4096"),
    ] {
        cases.push(store_file_case(
            &format!("file size_bytes = {size}"),
            store_file_with(&[], &file_device(size)),
            &[expected],
        ));
    }
    cases.push(store_file_case(
        "RAM device of 1 TiB",
        store_file_with(
            &[],
            "[[devices]]\nkind = \"ram\"\nsize_bytes = 1099511627776\n",
        ),
        &["RAM", "limit"],
    ));
    cases.push(store_file_case(
        "64 devices of 1 PiB",
        store_file_with(&[], &file_device("1125899906842624").repeat(64)),
        &["4 PiB"],
    ));
    cases.push(store_file_case(
        "65 devices",
        store_file_with(&[], &file_device("4194304").repeat(65)),
        &["65 devices"],
    ));
    cases.push(store_file_case(
        "no devices",
        store_file_with(&[], "devices = []\n"),
        &["0 devices"],
    ));
    cases.extend(flash_field_cases());
    cases.push(store_file_case(
        "unknown field",
        store_file_with(&[("bogus", "1")], IMAGE_DEVICE),
        &["bogus"],
    ));
    cases.push(store_file_case(
        "unknown device kind",
        store_file_with(&[], "[[devices]]\nkind = \"tape\"\nsize_bytes = 4096\n"),
        &["tape"],
    ));
    cases.push(store_file_case(
        "not TOML",
        "[[[ nothing".to_string(),
        &["is not a store file", "flashpipe put STORE.toml FILE"],
    ));
    cases
}

fn flash_field_cases() -> Vec<Case> {
    let flash = |field: &str, value: &str| {
        format!("[[devices]]\nkind = \"flash\"\npreset = \"minflash\"\n{field} = {value}\n")
    };
    let mut cases = Vec::new();
    for (field, value, expected) in [
        ("over_provisioning", "nan", "over_provisioning"),
        ("over_provisioning", "2.0", "over_provisioning"),
        ("over_provisioning", "-0.5", "over_provisioning"),
        ("over_provisioning", "inf", "over_provisioning"),
        ("blocks_per_plane", "0", "blocks_per_plane"),
        ("blocks_per_plane", "4294967295", "blocks_per_plane"),
        ("blocks_per_plane", "4294967296", "4294967296"),
        (
            "checkpoint_interval_pages",
            "1099511627776",
            "checkpoint_interval_pages",
        ),
        ("checkpoint_interval_pages", "-1", "-1"),
        ("size_bytes", "1000", "size_bytes"),
        ("size_bytes", I64_MAX, "size_bytes"),
        ("preset", "\"nosuch.toml\"", "nosuch.toml"),
    ] {
        cases.push(store_file_case(
            &format!("flash {field} = {value}"),
            store_file_with(&[], &flash(field, value)),
            &[expected],
        ));
    }
    cases
}

/// `flashpipe run s.toml` followed by `options`.
fn run<'a>(options: &[&'a str]) -> Vec<&'a str> {
    let mut arguments = vec!["run", "s.toml"];
    arguments.extend_from_slice(options);
    arguments
}

/// Commands against the shared store with bad names, options and kernel options.
fn store_command_cases() -> Vec<Case> {
    let long_name = "n".repeat(5000);
    let mut cases = Vec::new();
    let mut store_case = |arguments: Vec<&str>, expected: &[&str]| {
        cases.push(on_store(case(
            &format!(
                "store command {:?}",
                arguments.join(" ").chars().take(80).collect::<String>()
            ),
            &arguments,
            expected,
        )));
    };
    store_case(
        run(&["--workers", "100000", "crc32c", "t.txt"]),
        &["--workers", "256"],
    );
    store_case(
        run(&["--workers", "0", "crc32c", "t.txt"]),
        &["--workers", "within"],
    );
    store_case(
        run(&["--workers", "257", "crc32c", "t.txt"]),
        &["--workers", "256"],
    );
    store_case(
        run(&["--workers", "18446744073709551616", "crc32c", "t.txt"]),
        &["--workers"],
    );
    store_case(
        run(&["--readers", "0", "crc32c", "t.txt"]),
        &["--readers", "within"],
    );
    store_case(
        run(&["--readers", "65", "crc32c", "t.txt"]),
        &["--readers", "64"],
    );
    store_case(
        run(&["--readers", "100000", "crc32c", "t.txt"]),
        &["--readers", "64"],
    );
    store_case(run(&["nosuch-kernel", "t.txt"]), &["unknown kernel"]);
    store_case(run(&["crc32c", "no-such-file"]), &["no-such-file"]);
    store_case(run(&["crc32c", "bogus=1", "t.txt"]), &["bogus"]);
    store_case(run(&["grep", "t.txt"]), &["pattern"]);
    store_case(run(&["grep", "pattern=", "t.txt"]), &["pattern", "4096"]);
    let long_pattern = format!("pattern={}", "a".repeat(5000));
    store_case(run(&["grep", &long_pattern, "t.txt"]), &["pattern", "4096"]);
    store_case(run(&["grep", "pattern=(", "t.txt"]), &["pattern"]);
    store_case(
        run(&["grep", "pattern=a{1000}{1000}{1000}", "t.txt"]),
        &["pattern"],
    );
    store_case(
        run(&["grep", "pattern=a", "pattern=b", "t.txt"]),
        &["more than once"],
    );
    store_case(
        run(&["grep", "pattern=a", "max_line_bytes=0", "t.txt"]),
        &["max_line_bytes", "1073741824"],
    );
    store_case(
        run(&["grep", "pattern=a", "max_line_bytes=2G", "t.txt"]),
        &["max_line_bytes", "1073741824"],
    );
    store_case(
        run(&["grep", "pattern=a", "max_matches=1G", "t.txt"]),
        &["max_matches", "16777216"],
    );
    store_case(
        run(&[
            "grep",
            "pattern=a",
            "max_matches=99999999999999999999",
            "t.txt",
        ]),
        &["max_matches"],
    );
    store_case(
        run(&["grep", "pattern=a", "max_matches=-1", "t.txt"]),
        &["max_matches"],
    );
    store_case(
        run(&["grep", "pattern=a", "literal=maybe", "t.txt"]),
        &["literal"],
    );
    store_case(
        run(&["knn", "queries=q.bin", "dimensions=0", "t.txt"]),
        &["dimensions", "65536"],
    );
    store_case(
        run(&["knn", "queries=q.bin", "dimensions=70000", "t.txt"]),
        &["dimensions", "65536"],
    );
    store_case(
        run(&["knn", "queries=q.bin", "dimensions=4", "k=2000", "t.txt"]),
        &["k=2000", "1024"],
    );
    store_case(
        run(&["knn", "queries=no-such.bin", "dimensions=4", "t.txt"]),
        &["queries", "no-such.bin"],
    );
    store_case(
        run(&["knn", "queries=.", "dimensions=4", "t.txt"]),
        &["queries", "regular file"],
    );
    store_case(run(&["sort", "record=0", "t.txt"]), &["record", "1048576"]);
    store_case(run(&["sort", "record=2M", "t.txt"]), &["record", "1048576"]);
    store_case(
        run(&["sort", "record=16", "key=17", "t.txt"]),
        &["key", "16"],
    );
    store_case(
        run(&["sort", "record=16", "memory=2048G", "t.txt"]),
        &["memory", "68719476736"],
    );
    store_case(
        run(&["sort", "record=16", "memory=99999999999999999999G", "t.txt"]),
        &["memory"],
    );
    store_case(
        run(&["sort", "record=16", "temp_dir=no-such-folder", "t.txt"]),
        &["temp_dir", "no-such-folder"],
    );
    store_case(
        run(&["search-index", "record=1M", "block_records=1M", "t.txt"]),
        &["block_records", "1073741824"],
    );
    store_case(
        run(&["search-index", "record=16", "block_records=0", "t.txt"]),
        &["block_records", "1048576"],
    );
    store_case(
        run(&["des-ecb", "key=zz", "t.txt"]),
        &["key", "hexadecimal"],
    );
    store_case(run(&["des-ecb", "key=0011", "t.txt"]), &["key", "8 bytes"]);
    store_case(
        run(&[
            "des-ecb",
            "key=0011223344556677",
            "direction=sideways",
            "t.txt",
        ]),
        &["direction"],
    );
    store_case(
        run(&[
            "aes128-ctr",
            "key=00112233445566778899aabbccddeeff",
            "iv=00",
            "t.txt",
        ]),
        &["iv", "16 bytes"],
    );
    store_case(
        run(&["aes128-ctr", "key=\u{e9}\u{e9}", "iv=00", "t.txt"]),
        &["key"],
    );
    store_case(run(&["--output", "", "sobel", "t.txt"]), &["output name"]);
    store_case(
        run(&["--output", "a/b", "sobel", "t.txt"]),
        &["output name"],
    );
    store_case(run(&["--output", "x", "crc32c", "t.txt"]), &["--output"]);
    store_case(vec!["ls", "s.toml", &long_name], &[]);
    store_case(vec!["stat", "s.toml", ""], &[]);
    store_case(vec!["cat", "s.toml", "no-such-name"], &["no-such-name"]);
    store_case(
        vec!["get", "s.toml", "no-such-name", "out.bin"],
        &["no-such-name"],
    );
    store_case(vec!["rm", "s.toml", "no-such-name"], &["no-such-name"]);
    store_case(vec!["mv", "s.toml", "no-such-name", "b"], &["no-such-name"]);
    store_case(vec!["mv", "s.toml", "t.txt", ""], &[]);
    store_case(vec!["mv", "s.toml", "t.txt", &long_name], &[]);
    store_case(vec!["cp", "s.toml", "t.txt", "a/b"], &[]);
    store_case(
        vec!["put", "s.toml", "no-such-local-file"],
        &["no-such-local-file"],
    );
    store_case(vec!["ls", "no-such-store.toml"], &["no-such-store.toml"]);
    store_case(vec!["ls", "."], &[]);
    cases
}

fn mkfs_and_kernels_cases() -> Vec<Case> {
    let mut cases = vec![
        case(
            "mkfs: RAM device of 1 TiB",
            &["mkfs", "--devices", "ram:1TiB", "new.toml"],
            &["RAM", "limit"],
        ),
        case(
            "mkfs: file device of 2 PiB",
            &["mkfs", "--devices", "x.img", "--size", "2PiB", "new.toml"],
            &["limit"],
        ),
        case(
            "mkfs: queue depth 0",
            &command_line(
                "mkfs --devices x.img --size 4MiB --queue-depth 0 new.toml",
                &[],
            ),
            &["queue_depth"],
        ),
        case(
            "mkfs: queue depth 10^6",
            &command_line(
                "mkfs --devices x.img --size 4MiB --queue-depth 1000000 new.toml",
                &[],
            ),
            &["queue_depth", "4096"],
        ),
        case(
            "mkfs: block size 2 GiB",
            &command_line(
                "mkfs --devices x.img --size 4MiB --block-size 2GiB new.toml",
                &[],
            ),
            &["block"],
        ),
        case(
            "mkfs: size 2^64",
            &command_line(
                "mkfs --devices x.img --size 18446744073709551616 new.toml",
                &[],
            ),
            &["size"],
        ),
        case(
            "mkfs: flash over-provisioning NaN",
            &command_line(
                "mkfs --devices flash:minflash --flash-over-provisioning nan new.toml",
                &[],
            ),
            &["over_provisioning"],
        ),
        case(
            "kernels --measure --size 2G",
            &["kernels", "--measure", "--size", "2GiB"],
            &["--size", "1073741824"],
        ),
        case(
            "kernels --measure --seconds NaN",
            &["kernels", "--measure", "--seconds", "NaN"],
            &["--seconds"],
        ),
        case(
            "kernels --measure --seconds -1",
            &["kernels", "--measure", "--seconds=-1"],
            &["--seconds"],
        ),
        case(
            "kernels eval-langid --pieces 0",
            &["kernels", "eval-langid", "--pieces", "0"],
            &["--pieces", "1048576"],
        ),
        case(
            "kernels eval-langid --pieces 2^40",
            &["kernels", "eval-langid", "--pieces", "1099511627776"],
            &["--pieces", "1048576"],
        ),
        case(
            "kernels train-langid --features 0",
            &command_line("kernels train-langid --features 0 --out p.bin", &[]),
            &["--features"],
        ),
        case(
            "kernels train-langid --features 2^40",
            &command_line(
                "kernels train-langid --features 1099511627776 --out p.bin",
                &[],
            ),
            &["--features"],
        ),
        case(
            "kernels train-langid --order 9",
            &["kernels", "train-langid", "--order", "9", "--out", "p.bin"],
            &["--order"],
        ),
        case(
            "kernels eval-langid --train-fraction NaN",
            &["kernels", "eval-langid", "--train-fraction", "NaN"],
            &["--train-fraction"],
        ),
    ];
    for (arguments, expected) in [
        (
            &["ftl", "wa", "--blocks-per-chip", "0"][..],
            "--blocks-per-chip",
        ),
        (
            &["ftl", "wa", "--pages-per-block", "100000"][..],
            "--pages-per-block",
        ),
        (
            &["ftl", "wa", "--device-writes", "4000000000"][..],
            "--device-writes",
        ),
        (&["ftl", "wa", "--plot", "chart.txt"][..], "--plot"),
        (&["bench", "device", "--no-fio", "--qd", "0"][..], "--qd"),
        (
            &["bench", "device", "--no-fio", "--qd", "4000000000"][..],
            "--qd",
        ),
        (
            &["bench", "device", "--no-fio", "--size", "1EiB"][..],
            "--size",
        ),
        (
            &["bench", "device", "--no-fio", "--runtime-seconds", "NaN"][..],
            "--runtime-seconds",
        ),
        (
            &["bench", "fs", "--no-fio", "--small-files", "4000000000"][..],
            "--small-files",
        ),
        (&["demo", "--parts", "0"][..], "--parts"),
        (&["demo", "--large-file-size", "1EiB"][..], "1EiB"),
        (&["bench", "kernels", "--size", "1EiB"][..], "1EiB"),
    ] {
        cases.push(case(&format!("{arguments:?}"), arguments, &[expected]));
    }
    let in_folder = |name: &str, arguments: &[&str], expected: &[&str], file: CaseFile| {
        with_file(case(name, arguments, expected), "in", file)
    };
    cases.push(in_folder(
        "kernels run: a folder as input",
        &["kernels", "run", "crc32c", "in"],
        &["in", "not a regular file"],
        CaseFile::Folder,
    ));
    cases.push(in_folder(
        "kernels run: a FIFO as input",
        &["kernels", "run", "crc32c", "in"],
        &["in", "not a regular file"],
        CaseFile::Fifo,
    ));
    cases.push(in_folder(
        "kernels run: --chunk 2 GiB",
        &["kernels", "run", "crc32c", "--chunk", "2GiB", "in"],
        &["--chunk", "1073741824"],
        CaseFile::Text("data".to_string()),
    ));
    cases.push(in_folder(
        "kernels run: bad option",
        &command_line("kernels run grep -o pattern=a -o max_matches=1G in", &[]),
        &["max_matches", "16777216"],
        CaseFile::Text("data".to_string()),
    ));
    cases.push(in_folder(
        "kernels run: option value of 5000 bytes",
        &command_line(
            "kernels run grep -o {} in",
            &[&format!("pattern={}", "x".repeat(5000))],
        ),
        &["pattern", "4096"],
        CaseFile::Text("data".to_string()),
    ));
    cases
}

fn all_cases() -> Vec<Case> {
    let mut cases = preset_cases();
    cases.extend(blkparse_cases());
    cases.extend(disksim_cases());
    cases.extend(sim_job_cases());
    cases.extend(store_field_cases());
    cases.extend(store_command_cases());
    cases.extend(mkfs_and_kernels_cases());
    cases
}

fn run_binary(folder: &Path, arguments: &[String]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(arguments)
        .current_dir(folder)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the flashpipe binary runs")
}

fn write_case_file(folder: &Path, name: &str, file: &CaseFile) {
    let path = folder.join(name);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&path);
    match file {
        CaseFile::Text(text) => std::fs::write(&path, text).expect("case file"),
        CaseFile::Folder => std::fs::create_dir(&path).expect("case folder"),
        CaseFile::Fifo => {
            let status = Command::new("mkfifo")
                .arg(&path)
                .status()
                .expect("mkfifo runs");
            assert!(status.success(), "mkfifo {}", path.display());
        }
    }
}

fn remove_case_file(folder: &Path, name: &str) {
    let path = folder.join(name);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&path);
}

/// Every regular file directly in `folder` with its bytes.
fn snapshot(folder: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(folder)
        .expect("store folder")
        .map(|entry| entry.expect("folder entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).expect("store file readable");
            (path, bytes)
        })
        .collect()
}

/// A small store with one file `t.txt`, and a kNN query file `q.bin` beside it.
fn make_store(folder: &Path) {
    std::fs::write(folder.join("t.txt"), "hello hostile world\n").expect("sample");
    std::fs::write(folder.join("q.bin"), [0u8; 16]).expect("queries");
    for arguments in [
        vec!["mkfs", "--devices", "a.img", "--size", "4MiB", "s.toml"],
        vec!["put", "s.toml", "t.txt"],
    ] {
        let output = run_binary(folder, &strings(&arguments));
        assert!(
            output.status.success(),
            "{arguments:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Runs one case; returns a description of what went wrong, if anything.
fn check_case(case: &Case, folder: &Path) -> Option<String> {
    for (name, file) in &case.files {
        write_case_file(folder, name, file);
    }
    let before = case.against_store.then(|| snapshot(folder));
    let output = run_binary(folder, &case.arguments);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    println!(
        "case {:?}: exit {:?}: {}",
        case.name,
        output.status.code(),
        stderr.trim_end()
    );
    let mut problems = Vec::new();
    if output.status.code().is_none_or(|code| code == 0) {
        problems.push(format!(
            "exit status {:?} (expected a non-zero exit code)",
            output.status
        ));
    }
    for forbidden in ["panicked", "RUST_BACKTRACE", "fatal runtime error"] {
        if stderr.contains(forbidden) {
            problems.push(format!("standard error holds {forbidden:?}"));
        }
    }
    for word in &case.expected {
        if !stderr.contains(word.as_str()) {
            problems.push(format!("standard error lacks {word:?}"));
        }
    }
    if let Some(before) = before {
        let mut after = snapshot(folder);
        for (name, _) in &case.files {
            after.remove(&folder.join(name));
        }
        let mut before = before;
        for (name, _) in &case.files {
            before.remove(&folder.join(name));
        }
        if before != after {
            problems.push("the store folder's files changed".to_string());
        }
    }
    for (name, _) in &case.files {
        remove_case_file(folder, name);
    }
    (!problems.is_empty()).then(|| {
        format!(
            "case {:?} (flashpipe {:?}): {}; stderr: {stderr}",
            case.name,
            case.arguments,
            problems.join("; ")
        )
    })
}

#[test]
fn every_hostile_input_is_refused_with_a_clear_message_and_changes_nothing() {
    let cases = all_cases();
    assert!(cases.len() >= 100, "the suite holds {} cases", cases.len());
    let scratch = fresh_folder("hostile-input");
    let store_folder = scratch.join("store");
    let plain_folder = scratch.join("plain");
    std::fs::create_dir_all(&store_folder).expect("store folder");
    std::fs::create_dir_all(&plain_folder).expect("plain folder");
    make_store(&store_folder);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let folder = if case.against_store {
                &store_folder
            } else {
                &plain_folder
            };
            check_case(case, folder)
        })
        .collect();
    println!("{} hostile inputs, {} failed", cases.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&scratch);
}
