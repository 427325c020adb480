//! The one spin knob through the binary: `--spin-us` and `FLASHPIPE_SPIN_US` bounded and
//! checked before anything is opened, and the flags it replaced refused by name; NBD's
//! reader window (`--reader-window-us`) likewise.

mod common;

use common::check_fails_in_env;

#[test]
fn the_flags_the_one_knob_replaced_are_refused_by_name() {
    let folder = common::fresh_folder("spin-flags-old");
    let store = common::file_store(folder.path(), "8MiB");
    let store = common::text(&store);
    for (arguments, old) in [
        (
            vec!["serve", store, "--answer-spin-us", "5"],
            "--answer-spin-us",
        ),
        (
            vec!["serve", store, "--ring-spin-us", "5"],
            "--ring-spin-us",
        ),
        (
            vec!["bench", "net", "--flashpipe-spin-us", "0"],
            "--flashpipe-spin-us",
        ),
        (
            vec!["bench", "serve", "--ring-spin-us", "0"],
            "--ring-spin-us",
        ),
    ] {
        check_fails_in_env(&arguments, &[], old);
    }
}

#[test]
fn a_spin_window_out_of_bounds_changes_nothing() {
    let folder = common::fresh_folder("spin-flags-bounds");
    let (socket, image, export) = nbd_paths(folder.path());
    let nbd = nbd_serve(&export, &socket);
    let mut too_long = nbd.to_vec();
    too_long.extend(["--spin-us", "10001"]);
    check_fails_in_env(&too_long, &[], "at most 10000");
    check_fails_in_env(&nbd, &[("FLASHPIPE_SPIN_US", "soon")], "FLASHPIPE_SPIN_US");
    check_fails_in_env(&nbd, &[("FLASHPIPE_SPIN_US", "99999999")], "at most 10000");
    assert!(!socket.exists(), "no socket was made");
    assert!(!image.exists(), "no export file was made");

    let store = common::file_store(folder.path(), "8MiB");
    let serve = ["serve", common::text(&store)];
    check_fails_in_env(&serve, &[("FLASHPIPE_SPIN_US", "-1")], "FLASHPIPE_SPIN_US");
    let mut too_long = serve.to_vec();
    too_long.extend(["--spin-us", "20000"]);
    check_fails_in_env(&too_long, &[], "at most 10000");
    let socket = flashpipe_client_socket(&store);
    assert!(!socket.exists(), "no server socket was made");
}

#[test]
fn a_reader_window_out_of_bounds_or_not_a_number_changes_nothing() {
    let folder = common::fresh_folder("reader-window-bounds");
    let (socket, image, export) = nbd_paths(folder.path());
    for (window, expected) in [
        ("10001", "at most 10000"),
        ("18446744073709551616", "to 10000"),
        ("-1", "\"auto\""),
        ("soon", "\"auto\""),
        ("", "--reader-window-us"),
    ] {
        let flag = format!("--reader-window-us={window}");
        let mut arguments = nbd_serve(&export, &socket).to_vec();
        arguments.push(flag.as_str());
        check_fails_in_env(&arguments, &[], expected);
    }
    assert!(!socket.exists(), "no socket was made");
    assert!(!image.exists(), "no export file was made");
}

/// The socket, the export's image (neither made by a refused command) and the export
/// argument of an NBD server in `folder`.
fn nbd_paths(folder: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let socket = folder.join("nbd.sock");
    let image = folder.join("disk.img");
    let export = format!("d={}", common::text(&image));
    (socket, image, export)
}

/// `nbd serve` of `export` on `socket`, before any spin flag.
fn nbd_serve<'a>(export: &'a str, socket: &'a std::path::Path) -> [&'a str; 6] {
    [
        "nbd",
        "serve",
        "--export",
        export,
        "--socket",
        common::text(socket),
    ]
}

/// Where `flashpipe serve` would listen for `store` (beside the store file).
fn flashpipe_client_socket(store: &std::path::Path) -> std::path::PathBuf {
    let mut name = store.file_name().unwrap().to_os_string();
    name.push(".sock");
    store.with_file_name(name)
}
