//! Operations of the file system as plans: a [`Plan`] changes the in-memory state and says
//! what it needs from the device next ([`Step::Issue`]) or that it is done
//! ([`Step::Done`]); a driver issues the operations, waits for all of them and hands the
//! outcome back. The plan never touches a device, so the same plan runs under the sync
//! driver here ([`run_plan`], over [`run_operations`]) and, later, under the engine's
//! asynchronous one.
//!
//! The contract of a driver: the operations of one step are all in flight together and
//! all reaped before the plan resumes (a view of a caller's buffer is never left with the
//! device); their completions come back in the order issued; a device failure comes back
//! as the step's outcome (after every operation of the step is reaped), so the plan
//! undoes what it allocated for the step. A plan that returned `Done` or an error is not
//! resumed.

use flashpipe_device::{BlockDevice, Completion, DeviceError, Operation};

use crate::io::run_operations;
use crate::state::State;

/// What a plan asks of its driver next.
#[derive(Debug)]
pub enum Step<T> {
    /// Issue these operations together and resume with their completions, in order.
    Issue(Vec<Operation>),
    /// The plan is finished.
    Done(T),
}

/// An operation of the file system as a state machine over the in-memory [`State`].
pub trait Plan {
    /// What a finished plan gives.
    type Output;
    /// Why a plan fails (a device failure among them).
    type Error;

    /// The first step: checks and in-memory changes, then the first operations, or done.
    fn start(&mut self, state: &mut State) -> Result<Step<Self::Output>, Self::Error>;

    /// The next step, given the outcome of the operations the last step issued.
    fn resume(
        &mut self,
        state: &mut State,
        outcome: Result<Vec<Completion>, DeviceError>,
    ) -> Result<Step<Self::Output>, Self::Error>;
}

/// The sync driver: runs `plan` to its end over `device`, one step at a time, each step's
/// operations in flight together.
pub fn run_plan<P: Plan>(
    plan: &mut P,
    state: &mut State,
    device: &mut dyn BlockDevice,
) -> Result<P::Output, P::Error> {
    let mut step = plan.start(state)?;
    loop {
        match step {
            Step::Done(output) => return Ok(output),
            Step::Issue(operations) => {
                assert!(
                    !operations.is_empty(),
                    "a plan that issues nothing is done instead"
                );
                let outcome = run_operations(device, operations);
                step = plan.resume(state, outcome)?;
            }
        }
    }
}
