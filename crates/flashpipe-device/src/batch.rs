//! Running a batch of requests to completion: the blocking helper upper layers share.
//!
//! [`run_batch`] keeps up to the device's queue depth in flight, tags requests with
//! their index, and returns the completions in the order the requests were given. It is
//! the simplest correct way to keep a device's queue full from synchronous code.
//! [`wait_in_steps`] is the `wait_completions` of a device built over others (a striped
//! set, a flash adapter, an FTL), which makes progress in steps of its own; [`hand_over`]
//! the `poll_completions` tail of a device that queues its finished completions.

use std::collections::VecDeque;

use crate::error::DeviceError;
use crate::request::{BlockDevice, Completion, Operation, Request};

/// The wait of a device that makes progress in steps of its own: poll; return what has
/// arrived; with nothing in flight, say so ([`crate::DeviceErrorKind::NothingInFlight`]);
/// else take one `step` (which blocks until something moves, or fails) and poll again.
pub fn wait_in_steps<D: BlockDevice + ?Sized>(
    device: &mut D,
    completions: &mut Vec<Completion>,
    mut step: impl FnMut(&mut D) -> Result<(), DeviceError>,
) -> Result<usize, DeviceError> {
    loop {
        let count = device.poll_completions(completions);
        if count > 0 {
            return Ok(count);
        }
        if device.in_flight() == 0 {
            return Err(device.info().nothing_in_flight());
        }
        step(device)?;
    }
}

/// The poll of a device that queues its finished completions in `ready` (the RAM disk, the
/// striped set): moves them all to `completions`, oldest first; how many moved.
#[inline]
pub fn hand_over(ready: &mut VecDeque<Completion>, completions: &mut Vec<Completion>) -> usize {
    let count = ready.len();
    completions.extend(ready.drain(..));
    count
}

/// Submits every operation (at most the queue depth at once), waits for all, and
/// returns their completions in input order. The device must have nothing else in
/// flight. The first error stops new submissions; requests already in flight are
/// still reaped, so no buffer is lost.
pub fn run_batch<D: BlockDevice + ?Sized>(
    device: &mut D,
    operations: Vec<Operation>,
) -> Result<Vec<Completion>, DeviceError> {
    assert_eq!(device.in_flight(), 0, "run_batch needs an idle device");
    let total = operations.len();
    let mut slots: Vec<Option<Completion>> = (0..total).map(|_| None).collect();
    let mut pending = operations.into_iter().enumerate();
    let mut reaped = Vec::new();
    let mut first_error = None;
    let mut done = 0;
    while done < total {
        while first_error.is_none() && device.in_flight() < device.info().queue_depth as usize {
            let Some((index, operation)) = pending.next() else {
                break;
            };
            let request = Request {
                tag: index as u64,
                operation,
            };
            if let Err(rejected) = device.submit(request) {
                first_error = Some(rejected.error);
            }
        }
        if device.in_flight() == 0 {
            break;
        }
        device.wait_completions(&mut reaped)?;
        for completion in reaped.drain(..) {
            if let (Err(error), None) = (&completion.status, &first_error) {
                first_error = Some(error.clone());
            }
            let index = completion.tag as usize;
            assert!(
                slots[index].is_none(),
                "completion for tag {index} arrived twice"
            );
            slots[index] = Some(completion);
            done += 1;
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(slots
            .into_iter()
            .map(|slot| slot.expect("every request completed"))
            .collect()),
    }
}

/// Runs one operation to completion and returns its completion (status checked).
pub fn run_one<D: BlockDevice + ?Sized>(
    device: &mut D,
    operation: Operation,
) -> Result<Completion, DeviceError> {
    let mut completions = run_batch(device, vec![operation])?;
    Ok(completions
        .pop()
        .expect("one operation gives one completion"))
}
