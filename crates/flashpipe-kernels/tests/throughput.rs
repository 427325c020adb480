//! A smoke run of the throughput measurement on tiny inputs (no timing is asserted).

use std::sync::Arc;

use flashpipe_kernels::langid::model::train;
use flashpipe_kernels::throughput::{measure_all, synthetic_text, MeasureSettings};

#[test]
fn every_kernel_gets_a_positive_throughput_row() {
    let text = synthetic_text(4096);
    let model = Arc::new(train(
        &[("xxx".to_string(), text.clone())],
        Default::default(),
    ));
    let settings = MeasureSettings {
        input_bytes: 64 * 1024,
        minimum_seconds: 0.0,
        worker_count: 2,
        langid: Some((model, text)),
        only: None,
    };
    let mut seen = 0;
    let rows = measure_all(&settings, |_| seen += 1).expect("measures");
    assert_eq!(rows.len(), seen);
    assert_eq!(rows.len(), 13, "one row per kernel variant");
    for row in rows {
        assert!(
            row.single_core_bytes_per_second > 0.0 && row.all_cores_bytes_per_second > 0.0,
            "{row:?}"
        );
    }
}
