//! Kernel runs through a server (issue #14): results equal to the same pipeline run in
//! process, transformed outputs committed under their names, a cancel mid-run that leaves
//! no output and no temporary, the server-wide kernel-run limit, and the server-wide
//! read-handle cap, each refused with its typed error and limit.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use common::{connect, listed_names, pattern, remote_code, start_server, wait_until};
use flashpipe_client::{
    CancelOutcome, Client, ErrorCode, KernelRunEvent, Response, RunKernelRequest, TransportExt,
};
use flashpipe_kernels::registry::build_kernel;
use flashpipe_pipeline::run::PipelineJob;
use flashpipe_pipeline::{run_pipeline, OutputTarget, PipelineConfig};
use flashpipe_protocol::Request;

fn run_request(kernel: &str, options: &[&str], inputs: &[String]) -> RunKernelRequest {
    RunKernelRequest {
        kernel: kernel.to_string(),
        options: options.iter().map(|option| option.to_string()).collect(),
        inputs: inputs.to_vec(),
        output: None,
        replace_outputs: false,
        reader_count: 1,
        worker_count: 2,
    }
}

/// A DES-CBC run of `inputs` on one worker: slow enough to be cancelled, limited or
/// stopped while it runs.
fn slow_run(inputs: &[String]) -> RunKernelRequest {
    RunKernelRequest {
        worker_count: 1,
        ..run_request(
            "des-cbc",
            &["key=0123456789abcdef", "iv=0011223344556677"],
            inputs,
        )
    }
}

fn put_files(client: &mut Client, count: usize, length: usize) -> Vec<String> {
    (0..count)
        .map(|index| {
            let name = format!("input-{index:03}");
            client.create(&name).expect("create");
            client
                .write(&name, 0, &pattern(length, index as u64))
                .expect("write");
            name
        })
        .collect()
}

/// The summaries (as JSON) the same kernel gives in this process over the same bytes.
fn in_process_summaries(kernel: &str, files: &[(String, Vec<u8>)]) -> Vec<String> {
    let store = common::ram_store();
    let mut client = store.engine.client(4);
    for (name, bytes) in files {
        client
            .call(flashpipe_engine::Command::Create { name: name.clone() })
            .expect("create");
        client
            .call(flashpipe_engine::Command::Write {
                name: name.clone(),
                offset_bytes: 0,
                data: flashpipe_device::IoBuf::from_slice(bytes),
            })
            .expect("write");
    }
    let names: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
    let config = PipelineConfig::for_engine(&store.engine_config, OutputTarget::Discard);
    let result = run_pipeline(PipelineJob {
        engine: &store.engine,
        engine_config: &store.engine_config,
        kernel: build_kernel(kernel, &[]).expect("kernel"),
        files: &names,
        config: &config,
        cancel: Arc::new(AtomicBool::new(false)),
    })
    .expect("in-process run");
    drop(client);
    store.close().expect("closed");
    result
        .files
        .iter()
        .map(|file| serde_json::to_string(&file.summary).expect("json"))
        .collect()
}

#[test]
fn a_kernel_run_through_the_server_equals_the_run_in_process() {
    let test = start_server("serve-kernel-equal", |_| {});
    let mut client = connect(&test.socket, true);
    let names = put_files(&mut client, 5, 20_000);
    let (files, summary) = client
        .run_kernel(run_request("sha256", &[], &names))
        .expect("submitted")
        .collect_all()
        .expect("the run succeeds");
    assert_eq!(files.len(), 5);
    assert_eq!(summary.kernel, "sha256");
    assert_eq!(summary.file_count, 5);
    assert_eq!(summary.input_bytes, 5 * 20_000);
    assert_eq!(summary.stages.len(), 4);
    let local: Vec<(String, Vec<u8>)> = names
        .iter()
        .enumerate()
        .map(|(index, name)| (name.clone(), pattern(20_000, index as u64)))
        .collect();
    let expected = in_process_summaries("sha256", &local);
    for file in &files {
        let result = file.result.as_ref().expect("each file succeeded");
        let index = file.index as usize;
        assert_eq!(file.name, names[index]);
        assert_eq!(
            String::from_utf8(result.summary_json.clone()).expect("utf-8"),
            expected[index],
            "{} digests the same through the server",
            file.name
        );
        assert_eq!(result.output_file, None);
    }
    client.stat("input-000").expect("the connection goes on");
}

#[test]
fn a_transforming_run_commits_its_outputs_under_their_names() {
    let test = start_server("serve-kernel-outputs", |_| {});
    let mut client = connect(&test.socket, false);
    let names = put_files(&mut client, 2, 8192);
    let options = ["key=0123456789abcdef"];
    let (files, summary) = client
        .run_kernel(run_request("des-ecb", &options, &names))
        .expect("submitted")
        .collect_all()
        .expect("the run succeeds");
    assert!(summary.output_bytes >= 2 * 8192);
    for file in &files {
        let output = file.result.as_ref().expect("ok").output_file.clone();
        assert_eq!(output, Some(format!("{}.des-ecb", file.name)));
    }
    let listed = listed_names(&mut client);
    assert!(listed.contains(&"input-000.des-ecb".to_string()));
    assert!(
        listed.iter().all(|name| !name.starts_with(".flashpipe")),
        "no temporary is left: {listed:?}"
    );
    let again = client
        .run_kernel(run_request("des-ecb", &options, &names))
        .expect("submitted")
        .collect_all()
        .expect_err("outputs exist");
    assert_eq!(remote_code(&again), ErrorCode::Exists);
    assert!(again.to_string().contains("--force"), "{again}");
    let unknown = client
        .run_kernel(run_request("no-such-kernel", &[], &names))
        .expect("submitted")
        .collect_all()
        .expect_err("unknown kernel");
    assert_eq!(remote_code(&unknown), ErrorCode::BadKernelRun);
    let twice = vec![names[0].clone(), names[0].clone()];
    let duplicate = client
        .run_kernel(run_request("sha256", &[], &twice))
        .expect("submitted")
        .collect_all()
        .expect_err("an input named twice");
    assert_eq!(remote_code(&duplicate), ErrorCode::BadKernelRun);
    assert!(duplicate.to_string().contains("named twice"), "{duplicate}");
    let missing = client
        .run_kernel(run_request("sha256", &[], &["absent".to_string()]))
        .expect("submitted")
        .collect_all()
        .expect_err("missing input");
    assert_eq!(remote_code(&missing), ErrorCode::NotFound);
}

#[test]
fn a_cancelled_run_stops_and_leaves_no_output() {
    let test = start_server("serve-kernel-cancel", |_| {});
    let mut client = connect(&test.socket, false);
    let names = put_files(&mut client, 8, 512 << 10);
    let before = listed_names(&mut client);
    let request = slow_run(&names);
    let mut run = client.run_kernel(request).expect("submitted");
    let outcome = run.cancel().expect("cancel answered");
    assert_eq!(outcome, CancelOutcome::Stopping);
    let mut ended = None;
    for event in &mut run {
        match event {
            Ok(KernelRunEvent::File(_)) => {}
            Ok(KernelRunEvent::Summary(_)) => panic!("a cancelled run has no summary"),
            Err(error) => ended = Some(error),
        }
    }
    drop(run);
    let error = ended.expect("the run ends with an error");
    assert_eq!(remote_code(&error), ErrorCode::Cancelled, "{error}");
    let after = listed_names(&mut client);
    assert_eq!(after, before, "no output and no temporary is left");
    assert_eq!(
        client.cancel(99).expect("cancel answered"),
        CancelOutcome::NotInFlight
    );
}

#[test]
fn runs_past_the_server_wide_limit_are_refused_with_the_limit() {
    let test = start_server("serve-kernel-limit", |config| config.max_kernel_runs = 1);
    let mut client = connect(&test.socket, false);
    let names = put_files(&mut client, 8, 1 << 20);
    let long_run = slow_run(&names);
    let first = client
        .submit(Request::RunKernel(long_run))
        .expect("submitted");
    let second = client
        .submit(Request::RunKernel(run_request("sha256", &[], &names[..1])))
        .expect("submitted");
    let refused = client.wait_for(second).expect_err("past the limit");
    assert_eq!(
        remote_code(&refused),
        ErrorCode::TooManyKernelRuns,
        "{refused}"
    );
    assert_eq!(refused.limit(), Some(1));
    client.cancel(first).expect("cancel answered");
    while let Ok(Response::KernelFile(_)) = client.wait_for(first) {}
    client
        .run_kernel(run_request("sha256", &[], &names[..1]))
        .expect("submitted")
        .collect_all()
        .expect("a run fits again once the first has ended");
}

#[test]
fn clients_past_the_server_wide_read_handle_cap_are_refused_with_the_limit() {
    let test = start_server("serve-read-handle-cap", |config| {
        config.max_read_handles_per_client = 4;
        config.max_read_handles = 6;
    });
    let mut first = connect(&test.socket, true);
    first.create("f").expect("create");
    first.write("f", 0, &pattern(4096, 1)).expect("write");
    let held_by_first: Vec<_> = (0..4)
        .map(|_| first.read("f", 0, 4096).expect("read by reference"))
        .collect();
    let mut second = connect(&test.socket, true);
    let held_by_second: Vec<_> = (0..2)
        .map(|_| second.read("f", 0, 4096).expect("read by reference"))
        .collect();
    let refused = second
        .read("f", 0, 4096)
        .expect_err("past the server's cap");
    assert_eq!(remote_code(&refused), ErrorCode::ServerReadHandles);
    assert_eq!(refused.limit(), Some(6));
    drop(held_by_first);
    first.release_now().expect("released");
    first.stat("f").expect("the release has reached the server");
    let view = second.read("f", 0, 4096).expect("room again");
    assert_eq!(view.len(), 4096);
    drop((view, held_by_second));
    drop(first);
    wait_until(|| test.server.counters().clients_now == 1);
    let again: Vec<_> = (0..4)
        .map(|_| {
            second
                .read("f", 0, 4096)
                .expect("a gone client's handles are back")
        })
        .collect();
    assert_eq!(again.len(), 4);
    second.flush().expect("flush");
}

#[test]
fn a_stopping_server_cancels_its_kernel_runs_and_closes_the_store() {
    let test = start_server("serve-kernel-stop", |_| {});
    let mut client = connect(&test.socket, false);
    let names = put_files(&mut client, 8, 512 << 10);
    let request = slow_run(&names);
    let run = client
        .submit(Request::RunKernel(request))
        .expect("submitted");
    client.stat(&names[0]).expect("the run is registered");
    test.server.stop_handle().stop();
    let report = test
        .server
        .run_until_stopped()
        .expect("the store closes once the run has stopped");
    assert_eq!(report.counters.clients_now, 0);
    loop {
        match client.wait_for(run) {
            Ok(Response::KernelFile(_)) => continue,
            Ok(Response::KernelSummary(_)) => break,
            Ok(other) => panic!("answered {other:?}"),
            Err(error) => {
                let cancelled = error.remote().map(|remote| remote.code);
                assert!(
                    cancelled.is_none() || cancelled == Some(ErrorCode::Cancelled),
                    "a cancelled run, or a connection closed under it: {error}"
                );
                break;
            }
        }
    }
}

#[test]
fn two_runs_at_once_share_the_engine_read_pool() {
    let test = start_server("serve-kernel-two", |config| config.max_kernel_runs = 2);
    let mut client = connect(&test.socket, false);
    let names = put_files(&mut client, 12, 1 << 20);
    let first = client
        .submit(Request::RunKernel(run_request("crc32c", &[], &names)))
        .expect("submitted");
    let second = client
        .submit(Request::RunKernel(run_request("sha256", &[], &names)))
        .expect("submitted");
    for (run, kernel) in [(first, "crc32c"), (second, "sha256")] {
        let mut files = 0;
        loop {
            match client.wait_for(run) {
                Ok(Response::KernelFile(file)) => {
                    file.result.expect("each file succeeds");
                    files += 1;
                }
                Ok(Response::KernelSummary(summary)) => {
                    assert_eq!(summary.kernel, kernel);
                    break;
                }
                Ok(other) => panic!("answered {other:?}"),
                Err(error) => panic!("{kernel} failed beside another run: {error}"),
            }
        }
        assert_eq!(files, 12);
    }
}
