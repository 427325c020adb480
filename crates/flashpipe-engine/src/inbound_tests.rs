//! Unit tests of the inbound sources' round robin: budgets, fairness, and sources that
//! misbehave (hand over too much, close); the command queue's turn beside busy sources.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver};

use super::*;
use crate::client::Completion;

/// A source with `left` commands queued, tagged with its `id` in the ticket's top bits;
/// hands over `per_poll` a poll whatever the budget says (more than it: garbage).
struct Counting {
    id: u64,
    left: u64,
    per_poll: usize,
    answers: Sender<Completion>,
    dropped: Arc<AtomicBool>,
}

impl InboundSource for Counting {
    fn poll(&mut self, _budget: usize, submit: &mut dyn FnMut(Submission)) -> SourceState {
        for _ in 0..self.per_poll {
            if self.left == 0 {
                return SourceState::Closed;
            }
            self.left -= 1;
            submit(Submission {
                ticket: self.id << 32 | self.left,
                command: Command::Stats,
                reply_to: ReplyTo::Queue(self.answers.clone()),
                destination: None,
                write_checksums: None,
            });
        }
        SourceState::Open
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

struct Made {
    dropped: Arc<AtomicBool>,
    answers: Receiver<Completion>,
}

fn source(sources: &mut Sources, id: u64, left: u64, per_poll: usize) -> Made {
    let (answers, answered) = bounded(1024);
    let dropped = Arc::new(AtomicBool::new(false));
    let added = sources.add(Box::new(Counting {
        id,
        left,
        per_poll,
        answers,
        dropped: Arc::clone(&dropped),
    }));
    assert!(added);
    Made {
        dropped,
        answers: answered,
    }
}

fn tickets_by_source(pending: &mut VecDeque<Message>) -> Vec<u64> {
    pending
        .drain(..)
        .map(|message| match message {
            Message::Command(submission) => submission.ticket >> 32,
            _ => panic!("sources hand over commands only"),
        })
        .collect()
}

#[test]
fn every_source_gets_its_budget_each_round_and_the_start_moves() {
    let mut sources = Sources::default();
    let _busy = source(&mut sources, 1, 1000, SOURCE_BUDGET);
    let _quiet = source(&mut sources, 2, 1000, 1);
    let mut pending = VecDeque::new();
    sources.poll_round(&mut pending);
    let first = tickets_by_source(&mut pending);
    assert_eq!(first.iter().filter(|&&id| id == 1).count(), SOURCE_BUDGET);
    assert_eq!(first.iter().filter(|&&id| id == 2).count(), 1);
    assert_eq!(first[0], 1);
    sources.poll_round(&mut pending);
    let second = tickets_by_source(&mut pending);
    assert_eq!(second[0], 2, "the next round starts with the next source");
}

#[test]
fn a_source_that_hands_over_more_than_its_budget_is_answered_and_dropped() {
    let mut sources = Sources::default();
    let garbage = source(&mut sources, 1, 1000, SOURCE_BUDGET + 3);
    let honest = source(&mut sources, 2, 1000, 2);
    let mut pending = VecDeque::new();
    sources.poll_round(&mut pending);
    let taken = tickets_by_source(&mut pending);
    assert_eq!(taken.iter().filter(|&&id| id == 1).count(), SOURCE_BUDGET);
    let refused: Vec<_> = garbage.answers.try_iter().collect();
    assert_eq!(refused.len(), 3);
    for (_, result) in refused {
        let error = result.expect_err("the extra commands are refused");
        assert!(error.to_string().contains("budget"), "{error}");
    }
    assert!(garbage.dropped.load(Ordering::SeqCst));
    assert!(!honest.dropped.load(Ordering::SeqCst));
    assert_eq!(sources.len(), 1);
    sources.poll_round(&mut pending);
    assert_eq!(tickets_by_source(&mut pending), vec![2, 2]);
}

#[test]
fn a_closed_source_is_dropped_after_its_last_commands() {
    let mut sources = Sources::default();
    let closing = source(&mut sources, 1, 3, SOURCE_BUDGET);
    let mut pending = VecDeque::new();
    sources.poll_round(&mut pending);
    assert_eq!(tickets_by_source(&mut pending), vec![1, 1, 1]);
    assert!(closing.dropped.load(Ordering::SeqCst));
    assert_eq!(sources.len(), 0);
    sources.poll_round(&mut pending);
    assert!(pending.is_empty());
}

#[test]
fn no_more_sources_than_the_limit_are_kept() {
    let mut sources = Sources::default();
    let made: Vec<_> = (0..MAX_INBOUND_SOURCES as u64)
        .map(|id| source(&mut sources, id, 1, 1))
        .collect();
    let dropped = Arc::new(AtomicBool::new(false));
    let (answers, _answered) = bounded(1);
    let added = sources.add(Box::new(Counting {
        id: 0,
        left: 1,
        per_poll: 1,
        answers,
        dropped: Arc::clone(&dropped),
    }));
    assert!(!added);
    assert!(dropped.load(Ordering::SeqCst), "the extra source is let go");
    assert_eq!(made.len(), sources.len());
}

/// Takes messages from `inputs` until the queue's (ticket `u64::MAX`) comes; how many of
/// the sources' came before it.
fn source_messages_before_the_queue_s(inputs: &mut crate::inputs::Inputs) -> usize {
    let mut before = 0;
    loop {
        match inputs.try_next() {
            Ok(Message::Command(submission)) if submission.ticket == u64::MAX => return before,
            Ok(_) => before += 1,
            Err(error) => panic!("the queue's message never came: {error}"),
        }
    }
}

/// Stepped inputs with one endless source handing over `per_poll` messages a poll; the
/// command queue's sender and where answers go.
fn inputs_beside_one_source(
    per_poll: usize,
) -> (
    Sender<Message>,
    crate::inputs::Inputs,
    Sender<Completion>,
    Receiver<Completion>,
) {
    let (queue, inbox) = bounded(4);
    let mut inputs = crate::inputs::Inputs::stepped(inbox);
    let (answers, answered) = bounded(1024);
    inputs.add_source(Box::new(Counting {
        id: 1,
        left: u64::MAX,
        per_poll,
        answers: answers.clone(),
        dropped: Arc::new(AtomicBool::new(false)),
    }));
    (queue, inputs, answers, answered)
}

#[test]
fn the_queue_is_looked_at_in_one_round_of_queue_look_every_beside_a_busy_source() {
    let (queue, mut inputs, answers, _answered) = inputs_beside_one_source(1);
    let queued = || {
        Message::Command(Submission {
            ticket: u64::MAX,
            command: Command::Stats,
            reply_to: ReplyTo::Queue(answers.clone()),
            destination: None,
            write_checksums: None,
        })
    };
    for _ in 0..3 {
        queue.send(queued()).expect("queued");
        let before = source_messages_before_the_queue_s(&mut inputs);
        assert!(
            before <= crate::QUEUE_LOOK_EVERY as usize,
            "{before} rounds of a busy source before the queue's turn"
        );
    }
}

#[test]
fn the_queue_is_looked_at_every_round_when_the_sources_are_idle() {
    let (queue, mut inputs, answers, _answered) = inputs_beside_one_source(0);
    for _ in 0..3 {
        queue
            .send(Message::Command(Submission {
                ticket: 7,
                command: Command::Stats,
                reply_to: ReplyTo::Queue(answers.clone()),
                destination: None,
                write_checksums: None,
            }))
            .expect("queued");
        let next = inputs
            .try_next()
            .expect("the queue's message in the first round");
        assert!(matches!(next, Message::Command(submission) if submission.ticket == 7));
    }
}
