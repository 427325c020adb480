//! Inbound sources at the engine's API boundary: a threaded engine polls a registered
//! source on its own thread, answers it where each submission says (a queue, a sink on
//! the engine thread), wakes from its doorbell park when the source's owner rings, and
//! lets a closed source go; a stepped engine polls sources in its steps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_engine::{
    Command, CompletionSink, Engine, EngineConfig, EngineError, Handoff, InboundSource, Reply,
    ReplyTo, SourceState, SteppedEngine, Submission, Ticket,
};
use flashpipe_fs::Filesystem;
use flashpipe_testkit::formatted::format_fs;

const BLOCK_BYTES: u32 = 4096;

fn format(seed: u64) -> Filesystem {
    let world = SimWorld::new(seed);
    let config = SimDiskConfig::default_for_tests("sim0", BLOCK_BYTES, 4096);
    world.add_disk(config).expect("a simulated disk");
    let disk = world.open_disk(0).expect("open the simulated disk");
    format_fs(Box::new(disk), BLOCK_BYTES)
}

/// A source fed through a channel (what a request ring is to a server's source); it
/// closes when `closed` is set and records that it was dropped.
struct Fed {
    commands: Receiver<(Ticket, Command)>,
    reply_to: ReplyTo,
    closed: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

impl InboundSource for Fed {
    fn poll(&mut self, budget: usize, submit: &mut dyn FnMut(Submission)) -> SourceState {
        for (ticket, command) in self.commands.try_iter().take(budget) {
            submit(Submission {
                ticket,
                command,
                reply_to: self.reply_to.clone(),
                destination: None,
                write_checksums: None,
            });
        }
        if self.closed.load(Ordering::SeqCst) && self.commands.is_empty() {
            return SourceState::Closed;
        }
        SourceState::Open
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

struct Feeding {
    commands: Sender<(Ticket, Command)>,
    closed: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

fn fed(reply_to: ReplyTo) -> (Feeding, Box<Fed>) {
    let (commands, taken) = unbounded();
    let closed = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let source = Box::new(Fed {
        commands: taken,
        reply_to,
        closed: Arc::clone(&closed),
        dropped: Arc::clone(&dropped),
    });
    let feeding = Feeding {
        commands,
        closed,
        dropped,
    };
    (feeding, source)
}

/// Completions taken on the engine thread, noting which thread it was.
#[derive(Default)]
struct Collected {
    completions: Mutex<Vec<(Ticket, bool, String)>>,
}

impl CompletionSink for Collected {
    fn complete(&self, ticket: Ticket, result: Result<Reply, EngineError>) {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        self.completions
            .lock()
            .unwrap()
            .push((ticket, result.is_ok(), thread));
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("timed out waiting until {what}");
}

#[test]
fn a_threaded_engine_answers_a_source_after_parking_on_its_doorbell() {
    for handoff in [Handoff::Park, Handoff::SpinThenPark { spin_us: 5 }] {
        let config = EngineConfig {
            handoff,
            ..EngineConfig::default()
        };
        let engine = Engine::start(format(1), config);
        let sender = engine.command_sender();
        assert!(sender.takes_sources(), "the engine has its doorbell");
        let (answers, answered) = bounded(64);
        let (feeding, source) = fed(ReplyTo::Queue(answers));
        sender.add_source(source).unwrap();
        for ticket in 1..=40u64 {
            std::thread::sleep(Duration::from_millis(1));
            let name = format!("f{ticket}");
            feeding
                .commands
                .send((ticket, Command::Create { name }))
                .unwrap();
            sender.ring();
            let (done, result) = answered.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(done, ticket);
            assert!(matches!(result, Ok(Reply::Done)));
        }
        feeding.closed.store(true, Ordering::SeqCst);
        sender.ring();
        wait_until("the closed source is dropped", || {
            feeding.dropped.load(Ordering::SeqCst)
        });
        let mut client = engine.client(4);
        assert!(matches!(client.call(Command::List), Ok(Reply::List(list)) if list.len() == 40));
        assert!(engine.counters().inbox_waits.parked > 0, "{handoff:?}");
        engine.shutdown().unwrap();
    }
}

#[test]
fn a_sink_is_answered_on_the_engine_thread() {
    let engine = Engine::start(format(2), EngineConfig::default());
    let sender = engine.command_sender();
    let sink = Arc::new(Collected::default());
    let (feeding, source) = fed(ReplyTo::Sink(sink.clone()));
    sender.add_source(source).unwrap();
    feeding.commands.send((7, Command::Stats)).unwrap();
    feeding
        .commands
        .send((
            8,
            Command::Stat {
                name: "missing".into(),
            },
        ))
        .unwrap();
    sender.ring();
    wait_until("both completions arrive", || {
        sink.completions.lock().unwrap().len() == 2
    });
    let completions = sink.completions.lock().unwrap().clone();
    assert_eq!(completions[0].0, 7);
    assert!(completions[0].1);
    assert_eq!(completions[1].0, 8);
    assert!(!completions[1].1, "a stat of a missing file fails");
    assert!(completions
        .iter()
        .all(|(_, _, thread)| thread == "flashpipe-engine"));
    drop(feeding);
    engine.shutdown().unwrap();
}

#[test]
fn the_engine_serves_sources_and_its_queue_side_by_side() {
    let engine = Engine::start(format(3), EngineConfig::default());
    let sender = engine.command_sender();
    let (answers, answered) = bounded(512);
    let (feeding, source) = fed(ReplyTo::Queue(answers));
    for ticket in 0..400u64 {
        feeding.commands.send((ticket, Command::Stats)).unwrap();
    }
    sender.add_source(source).unwrap();
    let mut client = engine.client(4);
    for index in 0..20 {
        let name = format!("q{index}");
        assert!(matches!(
            client.call(Command::Create { name }),
            Ok(Reply::Done)
        ));
    }
    wait_until("every source command is answered", || answered.len() == 400);
    drop(feeding);
    engine.shutdown().unwrap();
}

#[test]
fn a_stepped_engine_polls_its_sources_in_its_steps() {
    let mut engine = SteppedEngine::new(format(4), EngineConfig::default());
    let (answers, answered) = bounded(64);
    let (feeding, source) = fed(ReplyTo::Queue(answers));
    engine.add_source(source);
    assert_eq!(engine.source_count(), 1);
    for ticket in 1..=5u64 {
        let name = format!("s{ticket}");
        feeding
            .commands
            .send((ticket, Command::Create { name }))
            .unwrap();
    }
    engine.run_until_idle().unwrap();
    let tickets: Vec<_> = answered.try_iter().map(|(ticket, _)| ticket).collect();
    assert_eq!(tickets, vec![1, 2, 3, 4, 5]);
    feeding.closed.store(true, Ordering::SeqCst);
    engine.run_until_idle().unwrap();
    assert_eq!(engine.source_count(), 0);
    assert!(feeding.dropped.load(Ordering::SeqCst));
}
