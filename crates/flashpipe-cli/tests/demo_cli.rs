//! `flashpipe demo --disk-nodes N` through the binary: the demo's store striped over N
//! disk nodes on this machine (flashpipe's NBD server exporting a RAM disk each over
//! loopback TCP, reached by the NBD client) ingests, remounts, reads back and checks
//! clean, as over device files.

mod common;

use common::{command_line, fresh_folder, succeed, text};

#[test]
fn the_demo_runs_over_three_disk_nodes() {
    let folder = fresh_folder("demo-disk-nodes");
    let store = folder.join("store");
    let missing_data = folder.join("no-sample-data");
    succeed(&command_line(
        "demo --dir {} --data {} --large-file-size 8MiB --disk-nodes 3 --json",
        &[text(&store), text(&missing_data)],
    ));
    let store_file = std::fs::read_to_string(store.join("demo.toml")).expect("the store file");
    assert_eq!(
        store_file.matches("kind = \"nbd\"").count(),
        3,
        "{store_file}"
    );
}
