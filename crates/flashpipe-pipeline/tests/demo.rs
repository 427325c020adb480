//! The demo entry point: language identification and Sobel near the data on a RAM store, with
//! edge images written back and a printed comparison.

mod common;

use std::sync::Arc;

use common::store_with;
use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::langid::model::{train, TrainingSettings};
use flashpipe_kernels::langid::LangIdKernel;
use flashpipe_kernels::registry::build_kernel;
use flashpipe_pipeline::demo::{run_near_data_demo, NearDataDemo};

#[test]
fn demo_labels_text_and_writes_edge_images() {
    let english =
        b"the quick brown fox jumps over the lazy dog and all human beings are born free "
            .repeat(40);
    let german =
        b"alle menschen sind frei und gleich an wuerde und rechten geboren und mit vernunft "
            .repeat(40);
    let model = train(
        &[
            ("eng".to_string(), english.clone()),
            ("deu".to_string(), german.clone()),
        ],
        TrainingSettings::default(),
    );
    let langid: Arc<dyn Kernel> = Arc::new(Arc::new(LangIdKernel::new(Arc::new(model), 2048)));
    let image = flashpipe_kernels::throughput::synthetic_png(96, 64).expect("png");
    let store = store_with(&[
        ("english.txt", english),
        ("german.txt", german),
        ("picture.png", image),
    ]);
    let demo = NearDataDemo {
        engine: &store.engine,
        engine_config: &store.engine_config,
        langid,
        text_files: vec!["english.txt".into(), "german.txt".into()],
        sobel: build_kernel("sobel", &[]).expect("sobel"),
        image_files: vec!["picture.png".into()],
    };
    let mut printed = Vec::new();
    let rows = run_near_data_demo(&demo, &mut printed).expect("demo runs");
    assert_eq!(rows.len(), 2);
    assert!(
        rows[0].results.contains("eng") && rows[0].results.contains("deu"),
        "{:?}",
        rows[0]
    );
    assert_eq!(
        rows[1].output_files,
        vec!["picture.png.edges.png".to_string()]
    );
    assert!(store
        .contents("picture.png.edges.png")
        .starts_with(b"\x89PNG"));
    let printed = String::from_utf8(printed).expect("UTF-8");
    assert!(
        printed.contains("near-data") && printed.contains("sobel"),
        "{printed}"
    );
}
