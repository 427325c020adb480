//! The error sweep: every subcommand's common error paths through the real binary, each
//! checked for its exit status and, with `--json`, its kind and `exit_status` (the table
//! of docs/cli.md, repeated here so that a change to it is a deliberate one), and every
//! output (standard output and error) checked for Rust Debug text and issue numbers.
//! The help of every command and the kernels listing are swept for the same text.

mod common;
mod error_sweep_support;
mod serve_support;

use std::process::Command;

use common::{fresh_folder, succeed, text};
use error_sweep_support::*;

/// Every case of the sweep, one a line: the kind it fails with, then its command line
/// (words split at white space); `#` lines say what the cases below them have in common.
const CASES: &str = "
    # usage: the command line itself is wrong (clap, and the CLI's own checks).
    usage         nosuchcommand
    usage         put s.toml --json
    usage         ls s.toml --bogus --json
    usage         mkfs x.toml --json
    usage         get s.toml h.txt --json
    usage         cat s.toml h.txt --json
    usage         rm s.toml --json
    usage         stat s.toml --json
    usage         run s.toml grep pattern=x --json
    usage         completions tcsh
    usage         serve s.toml --no-such-option
    # no_match: a pattern matching nothing (grep's 1).
    no_match      ls s.toml zz* --json
    no_match      cat s.toml zz*
    no_match      stat s.toml zz* --json
    no_match      rm s.toml zz* --json
    no_match      get s.toml zz* . --json
    no_match      run s.toml grep pattern=zzz h.txt
    # not_found: store files, names, local files and folders that do not exist.
    not_found     ls missing.toml --json
    not_found     put missing.toml h.txt --json
    not_found     df missing.toml --json
    not_found     fsck missing.toml --json
    not_found     get s.toml nope out.txt --json
    not_found     stat s.toml nope --json
    not_found     rm s.toml nope --json
    not_found     mv s.toml nope x --json
    not_found     cp s.toml nope x --json
    not_found     cat s.toml nope
    not_found     put s.toml nofile.txt --json
    not_found     put s.toml nodir/ --json
    not_found     get s.toml h.txt nodir/ --json
    not_found     run s.toml sha256 nope --json
    not_found     ls m.toml --json
    not_found     serve missing.toml
    not_found     kernels train-langid --out p.bin --corpus /nonexistent --json
    # exists: the target is there already.
    exists        mkfs --devices b.img --size 16MiB s.toml --json
    exists        put s.toml h.txt --json
    exists        mv s.toml h.txt h2.txt --json
    exists        cp s.toml h.txt h2.txt --json
    exists        mkfs --devices a.img --size 64MiB new.toml --json
    # store_in_use: another process holds the store.
    store_in_use  put locked.toml h.txt --json
    store_in_use  ls locked.toml --json
    store_in_use  fsck locked.toml --json
    store_in_use  rm locked.toml x --json
    # invalid_input: wrong values, wrong files in the store's place.
    invalid_input mkfs --devices b.img --size 2GB b.toml --json
    invalid_input mkfs --devices tape:1 b.toml --json
    invalid_input mkfs --devices b.img --size 16MiB --mode 999 b.toml --json
    invalid_input mkfs --devices b.img --size lots b.toml --json
    invalid_input mkfs --devices b.img --size 16MiB --stripe-unit 1000 b.toml --json
    invalid_input mkfs --devices b.img --size 16MiB --block-size 3KiB b.toml --json
    invalid_input mkfs --devices b.img --size 16MiB --flash-over-provisioning 0.1 b.toml --json
    invalid_input put h.txt s.toml --json
    invalid_input ls blob.bin --json
    invalid_input ls notes.txt --json
    invalid_input get s.toml h* h.txt --json
    invalid_input rm s.toml h.txt h.txt --json
    invalid_input put s.toml h.txt --as bad/name --json
    invalid_input run s.toml sha256 h.txt --workers 0 --json
    invalid_input nbd serve --export nonsense
    invalid_input nbd serve --export d=tape:1
    invalid_input nbd serve --export d=ram:1MiB --listen 0.0.0.0:0
    invalid_input nbd serve --export d=ram:1MiB --realtime
    invalid_input nbd serve --export d=ram:1MiB --socket n.sock --tls-certificate nocert.pem \
                  --tls-key nokey.pem
    invalid_input nbd serve --export d=ram:1MiB --socket n.sock --tls-certificate notes.txt \
                  --tls-key notes.txt
    invalid_input serve s.toml --max-clients 0
    invalid_input sim speed --preset nope --json
    invalid_input ftl copy --size bogus --json
    # corrupt: damaged store files and images.
    corrupt       ls damaged.toml --json
    corrupt       ls z.toml --json
    corrupt       fsck z.toml --json
    # no_space: more data than the store holds.
    no_space      put tiny.toml big.bin --json
    # kernel: hostile and wrong kernel options.
    kernel        run s.toml nokernel h.txt --json
    kernel        run s.toml grep bogus=1 h.txt --json
    kernel        run s.toml grep h.txt --json
    kernel        run s.toml des-ecb key=zz h.txt --json
    kernel        run s.toml grep pattern=a max_line_bytes=-1 h.txt --json
    kernel        run s.toml grep pattern=a pattern=b h.txt --json
    kernel        run s.toml des-ecb key=0123456789abcdef decrypt=true h.txt --json
    # network: an NBD device nobody serves.
    network       mkfs --devices nbd://127.0.0.1:1/x --size 1MiB n.toml --json
";

/// Every case of the sweep.
fn cases() -> Vec<Case> {
    cases_of(CASES)
}

#[test]
fn every_error_path_has_its_kind_and_status_and_no_debug_text() {
    let folder = fresh_folder("error-sweep");
    fixture(&folder);
    let locked = std::fs::File::open(folder.join("locked.toml")).unwrap();
    // SAFETY: flock on a descriptor this test owns; no memory is shared.
    let status = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&locked),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    };
    assert_eq!(status, 0, "the test locks locked.toml");
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let failures = sweep(&folder, &cases, "", |_| Vec::new());
    drop(locked);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The cases run against a server holding the store, in the form of [`CASES`].
const SERVED_CASES: &str = "
    no_match      ls s.toml zz* --json
    not_found     get s.toml nope out.txt --json
    not_found     stat s.toml nope --json
    not_found     mv s.toml nope x --json
    exists        put s.toml h.txt --json
    exists        cp s.toml h.txt h.txt --json
    invalid_input put s.toml h.txt --as bad/name --json
    store_in_use  fsck s.toml --repair --json
    kernel        run s.toml nokernel h.txt --json
    kernel        run s.toml grep bogus=1 h.txt --json
    not_found     run s.toml sha256 nope --json
    no_match      run s.toml grep pattern=zzz h.txt
";

/// The benchmark, experiment and simulation commands' error paths, each a command line
/// split at spaces, run in a folder holding `t.txt` (a good blkparse trace), `bad.txt` (a
/// trace whose second line is long garbage with a control character), `bad.toml` (no
/// TOML) and `notes.txt`.
#[test]
fn through_a_server_the_kinds_are_the_same_and_its_logs_hold_no_debug_text() {
    let folder = fresh_folder("error-sweep-served");
    std::fs::write(folder.join("h.txt"), b"hello\n").unwrap();
    let store = common::file_store(&folder, "64MiB");
    succeed(&["put", text(&store), text(&folder.join("h.txt"))]);
    let server = serve_support::ServerProcess::start(&store, &["--log-format", "json"]);
    let mut failures = sweep(&folder, &cases_of(SERVED_CASES), "served ", |_| Vec::new());
    let exit = server.stop_with(libc::SIGTERM);
    for finding in findings(&format!("{}\n{}", exit.stdout, exit.stderr)) {
        failures.push(format!("the server's output holds {finding}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_user_without_access_gets_permission() {
    if !flashpipe_testkit::tools::programs_or_skip("error sweep permission", &["runuser"]) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        flashpipe_testkit::tools::skip(
            "error sweep permission",
            "not root, so no second user can be had with runuser",
        );
        return;
    }
    let folder = fresh_folder("error-sweep-permission");
    std::fs::set_permissions(&folder, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let store = common::file_store(&folder, "16MiB");
    // Runs `arguments` as nobody, as `expected` says (its kind, permission, and whether
    // `--json` is asked for): the command must be refused with that kind.
    let refused = |expected: &Case, arguments: &[&str], what: &str| {
        let output = Command::new("runuser")
            .args(["-u", "nobody", "--", env!("CARGO_BIN_EXE_flashpipe")])
            .args(arguments)
            .current_dir(&folder)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("{what}: {stderr}");
        let problems = check(expected, &output);
        assert!(problems.is_empty(), "{what}: {problems:?}: {stderr}");
    };
    let ls = case("permission", &["ls", "s.toml", "--json"]);
    let ls_store = ["ls", text(&store), "--json"];
    refused(
        &ls,
        &ls_store,
        "the store file is the owner's alone (mode 600)",
    );
    // A trace the user may not read, and a plot folder it may not make (the folder is
    // the owner's, mode 755): permission, from the operating system's error.
    let trace = "8,0 1 1 0.000001000 100 Q W 2048 + 8 [fio]\n";
    for (name, mode) in [("private.txt", 0o600), ("t.txt", 0o644)] {
        std::fs::write(folder.join(name), trace).unwrap();
        let permissions = std::os::unix::fs::PermissionsExt::from_mode(mode);
        std::fs::set_permissions(folder.join(name), permissions).unwrap();
    }
    for line in [
        "sim replay private.txt --format blkparse --json",
        "sim replay t.txt --format blkparse --plot plots --json",
    ] {
        let arguments: Vec<&'static str> = line.split(' ').collect();
        refused(&case("permission", &arguments), &arguments, line);
    }
    let server = serve_support::ServerProcess::start(&store, &[]);
    std::fs::set_permissions(&store, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    refused(
        &ls,
        &ls_store,
        "through a server: its private socket refuses the user",
    );
    for path in [store.as_path(), server.socket.as_path()] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
    }
    refused(
        &ls,
        &ls_store,
        "the socket widened by hand: the server's access rule refuses the user",
    );
    drop(server.stop_with(libc::SIGTERM));
}

/// Words of ordinary prose that are CamelCase but name no Rust type: units and a product.
const PROSE_CAMEL_CASE: &[&str] = &["KiB", "MiB", "GiB", "TiB", "WebAssembly"];

#[test]
fn help_and_listings_hold_no_debug_text_or_issue_numbers() {
    let folder = fresh_folder("error-sweep-help");
    let mut failures = Vec::new();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["bench", "--help"],
        vec!["demo", "--help"],
        vec!["kernels", "--help"],
        vec!["run", "--help"],
        vec!["sim", "--help"],
        vec!["nbd", "serve", "--help"],
        vec!["mkfs", "--help"],
        vec!["put", "--help"],
        vec!["get", "--help"],
        vec!["cat", "--help"],
        vec!["ls", "--help"],
        vec!["stat", "--help"],
        vec!["rm", "--help"],
        vec!["mv", "--help"],
        vec!["cp", "--help"],
        vec!["df", "--help"],
        vec!["fsck", "--help"],
        vec!["serve", "--help"],
        vec!["mount", "--help"],
        vec!["ftl", "--help"],
        vec!["cluster", "--help"],
        vec!["cluster", "node", "--help"],
        vec!["cluster", "page", "--help"],
        vec!["completions", "--help"],
        vec!["man", "--help"],
        vec!["kernels"],
        vec!["sim", "presets"],
    ];
    for arguments in &commands {
        let output = run_in(&folder, arguments);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let mut found = findings(&all);
        if arguments == &["kernels"] {
            found.extend(
                all.split(|c: char| !c.is_ascii_alphanumeric())
                    .filter(|word| is_camel_case(word) && !PROSE_CAMEL_CASE.contains(word))
                    .map(|word| format!("type name {word}")),
            );
        }
        if !output.status.success() {
            found.push(format!("exit {:?}", output.status.code()));
        }
        if !found.is_empty() {
            failures.push(format!("{arguments:?}: {}", found.join(", ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_finder_knows_debug_text_from_words() {
    for debug in [
        "Other(OtherError(CaUsedAsEndEntity))",
        "ServerCounters { clients: 1 }",
        "Some(3)",
        "Os { code: 2 }",
        "see issue 14",
        "rings (#14)",
    ] {
        assert!(!findings(debug).is_empty(), "{debug}");
    }
    for words in [
        "DES in ECB mode; PKCS#7 padding by default",
        "no such file: \"nope\"",
        "{\"error\":\"x\",\"kind\":\"io\"}",
        "a store of 64 MiB (RAID-0)",
    ] {
        assert!(findings(words).is_empty(), "{words}: {:?}", findings(words));
    }
}
