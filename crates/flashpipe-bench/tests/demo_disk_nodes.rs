//! `flashpipe demo --disk-nodes N`: the demo's store striped over N disk nodes on this
//! machine (flashpipe's NBD server exporting a RAM disk each over loopback TCP, reached by
//! the NBD client) ingests, remounts, reads back and checks clean, as over device files.

use flashpipe_bench::demo::{run, DemoArgs};

#[test]
fn the_demo_runs_over_three_disk_nodes() {
    let folder = std::env::temp_dir().join(format!("fp-demo-disk-nodes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    let missing_data = folder.join("no-sample-data");
    run(DemoArgs {
        dir: folder.clone(),
        data: Some(missing_data),
        large_file_size: "8MiB".to_string(),
        disk_nodes: Some(3),
        json: true,
    })
    .expect("the demo over disk nodes succeeds");
    let store_file = std::fs::read_to_string(folder.join("demo.toml")).expect("the store file");
    assert_eq!(
        store_file.matches("kind = \"nbd\"").count(),
        3,
        "{store_file}"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}
