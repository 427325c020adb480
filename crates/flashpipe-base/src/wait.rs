//! The one way a thread waits for a peer: poll, then spin-yield, then park.
//!
//! A thread that parks on an empty queue (a futex sleep) costs its peer a wake: on a
//! 2-vCPU virtual machine a sleep/wake round trip between two threads costs about 50 us,
//! where a spin round trip costs about 0.1 us. A [`Waiter`] therefore polls first, for a
//! bounded window of wall time ([`WaitPolicy::spin_us`]), and parks only when nothing
//! came in that window:
//!
//! 1. one poll; a result there is [`Waited::Ready`];
//! 2. [`POLLS_BEFORE_YIELDING`] polls with only a `spin_loop` hint between them (a few
//!    microseconds: an answer that close is caught without a system call);
//! 3. polls until the window ends, with a `spin_loop` hint between them and a
//!    `sched_yield` every [`POLLS_PER_YIELD`] polls, so a peer sharing the core runs;
//!    the clock is read once per [`POLLS_PER_YIELD`] polls. A result in 2 or 3 is
//!    [`Waited::Spun`];
//! 4. the caller's park closure (a channel's blocking `recv`, a ring's futex sleep):
//!    [`Waited::Parked`].
//!
//! A window of 0 parks right after the first poll: an idle thread burns nothing.
//! The window is wall time ([`RealClock`]), never a device's clock: it bounds how long a
//! thread polls and is not part of what anything measures. Deterministic simulation
//! never waits, so nothing here runs there.
//!
//! One knob, one name: `--spin-us` on every command that starts waiting threads, and the
//! environment variable [`SPIN_US_VARIABLE`]. Each role keeps a default of its own
//! (the engine's hand-off spins 200 us, the servers park at once): see the roles' docs.

use crossbeam_channel::{Receiver, RecvError, TryRecvError};

use crate::clock::{Clock, RealClock};

/// Longest spin window any role accepts, in microseconds (10 ms).
pub const MAX_SPIN_US: u32 = 10_000;

/// The environment variable naming a spin window in microseconds (as `--spin-us`).
pub const SPIN_US_VARIABLE: &str = "FLASHPIPE_SPIN_US";

/// Polls with only a `spin_loop` hint between them before yielding starts.
pub const POLLS_BEFORE_YIELDING: u32 = 128;

/// Polls between two looks at the clock, and between two yields once yielding.
pub const POLLS_PER_YIELD: u32 = 16;

/// A spin window refused: more than [`MAX_SPIN_US`], or not a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitPolicyError {
    /// The window is longer than [`MAX_SPIN_US`].
    #[error("a spin window of {spin_us} microseconds is refused: at most {max_spin_us} (0 parks at once)")]
    TooLong {
        /// The window asked for.
        spin_us: u64,
        /// [`MAX_SPIN_US`].
        max_spin_us: u32,
    },
    /// The text is not a whole number of microseconds.
    #[error("\"{text}\" is not a spin window: give a whole number of microseconds from 0 (park at once) to {max_spin_us}")]
    NotANumber {
        /// The text given.
        text: String,
        /// [`MAX_SPIN_US`].
        max_spin_us: u32,
    },
}

/// How long a waiting thread polls before it parks: the one knob of every wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WaitPolicy {
    spin_us: u32,
}

impl WaitPolicy {
    /// Park right after the first poll.
    pub const PARK: WaitPolicy = WaitPolicy { spin_us: 0 };

    /// A window of `spin_us` microseconds (0 parks at once).
    ///
    /// # Panics
    /// When `spin_us` is over [`MAX_SPIN_US`]: a caller with a value from outside uses
    /// [`WaitPolicy::checked`].
    pub const fn spin_us(spin_us: u32) -> WaitPolicy {
        assert!(spin_us <= MAX_SPIN_US, "spin window over MAX_SPIN_US");
        WaitPolicy { spin_us }
    }

    /// A window of `spin_us` microseconds, refused over [`MAX_SPIN_US`].
    pub fn checked(spin_us: u64) -> Result<WaitPolicy, WaitPolicyError> {
        match u32::try_from(spin_us) {
            Ok(value) if value <= MAX_SPIN_US => Ok(WaitPolicy { spin_us: value }),
            _ => Err(WaitPolicyError::TooLong {
                spin_us,
                max_spin_us: MAX_SPIN_US,
            }),
        }
    }

    /// The window written as text (a flag's value, [`SPIN_US_VARIABLE`]'s value).
    pub fn parse(text: &str) -> Result<WaitPolicy, WaitPolicyError> {
        let spin_us: u64 = text
            .trim()
            .parse()
            .map_err(|_| WaitPolicyError::NotANumber {
                text: text.to_string(),
                max_spin_us: MAX_SPIN_US,
            })?;
        WaitPolicy::checked(spin_us)
    }

    /// The window from [`SPIN_US_VARIABLE`]: `None` when it is not set.
    pub fn from_environment() -> Option<Result<WaitPolicy, WaitPolicyError>> {
        let text = std::env::var(SPIN_US_VARIABLE).ok()?;
        Some(WaitPolicy::parse(&text))
    }

    /// The window in microseconds.
    pub const fn window_us(self) -> u32 {
        self.spin_us
    }

    /// True when a waiter parks right after its first poll.
    pub const fn parks_at_once(self) -> bool {
        self.spin_us == 0
    }
}

impl std::str::FromStr for WaitPolicy {
    type Err = WaitPolicyError;

    fn from_str(text: &str) -> Result<WaitPolicy, WaitPolicyError> {
        WaitPolicy::parse(text)
    }
}

impl std::fmt::Display for WaitPolicy {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}", self.spin_us)
    }
}

/// How one wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The first poll had it.
    Ready,
    /// It came while spinning.
    Spun,
    /// The park closure ran.
    Parked,
}

/// Waits as a [`WaitPolicy`] says; see the module doc for the phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiter {
    policy: WaitPolicy,
}

impl Waiter {
    /// A waiter with `policy`.
    pub const fn new(policy: WaitPolicy) -> Waiter {
        Waiter { policy }
    }

    /// The policy.
    pub const fn policy(&self) -> WaitPolicy {
        self.policy
    }

    /// Polls `poll` (with `state`) until it gives a value or the window ends, then calls
    /// `park` (with `state`), which must return the value (a blocking receive, or a
    /// futex sleep and one more look). `state` lets the poll and the park both reach
    /// one `&mut` value (a ring handle) that two closures could not both borrow.
    pub fn wait_with<S: ?Sized, T>(
        &self,
        state: &mut S,
        mut poll: impl FnMut(&mut S) -> Option<T>,
        park: impl FnOnce(&mut S) -> T,
    ) -> (T, Waited) {
        if let Some(value) = poll(state) {
            return (value, Waited::Ready);
        }
        if let Some(value) = self.spin(state, &mut poll) {
            return (value, Waited::Spun);
        }
        (park(state), Waited::Parked)
    }

    /// As [`Waiter::wait_with`], with closures that need no shared state.
    pub fn wait<T>(
        &self,
        mut poll: impl FnMut() -> Option<T>,
        park: impl FnOnce() -> T,
    ) -> (T, Waited) {
        self.wait_with(&mut (), |_| poll(), |_| park())
    }

    /// Polls a channel: a message, the channel closed, or (window over) a blocking
    /// `recv`.
    pub fn receive<T>(&self, queue: &Receiver<T>) -> (Result<T, RecvError>, Waited) {
        self.wait(
            || match queue.try_recv() {
                Ok(message) => Some(Ok(message)),
                Err(TryRecvError::Disconnected) => Some(Err(RecvError)),
                Err(TryRecvError::Empty) => None,
            },
            || queue.recv(),
        )
    }

    /// Phases 2 and 3 of the module doc: `None` when the window passed with nothing.
    fn spin<S: ?Sized, T>(
        &self,
        state: &mut S,
        poll: &mut impl FnMut(&mut S) -> Option<T>,
    ) -> Option<T> {
        if self.policy.parks_at_once() {
            return None;
        }
        let clock = RealClock::new();
        let deadline_ns = clock
            .now_ns()
            .saturating_add(u64::from(self.policy.spin_us) * 1000);
        let mut polls = 0u32;
        loop {
            if let Some(value) = poll(state) {
                return Some(value);
            }
            polls = polls.wrapping_add(1);
            if polls % POLLS_PER_YIELD != 0 {
                std::hint::spin_loop();
                continue;
            }
            if polls > POLLS_BEFORE_YIELDING {
                std::thread::yield_now();
            }
            if clock.now_ns() >= deadline_ns {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A poll that turns true after `after_polls` calls, counting them.
    fn poll_after(after_polls: u32) -> impl FnMut(&mut u32) -> Option<u32> {
        move |count: &mut u32| {
            *count += 1;
            (*count > after_polls).then_some(*count)
        }
    }

    #[test]
    fn a_ready_value_is_taken_by_the_first_poll() {
        let mut count = 0;
        let (value, waited) =
            Waiter::new(WaitPolicy::spin_us(200))
                .wait_with(&mut count, poll_after(0), |_| unreachable!("never parks"));
        assert_eq!((value, waited), (1, Waited::Ready));
    }

    #[test]
    fn a_value_that_comes_while_spinning_is_caught_before_yielding() {
        let mut count = 0;
        let (value, waited) = Waiter::new(WaitPolicy::spin_us(MAX_SPIN_US)).wait_with(
            &mut count,
            poll_after(10),
            |_| unreachable!("never parks"),
        );
        assert_eq!((value, waited), (11, Waited::Spun));
    }

    #[test]
    fn a_value_that_comes_while_yielding_is_caught_before_parking() {
        let mut count = 0;
        // Two yields in: a 10 ms window holds them even on a loaded machine.
        let late = POLLS_BEFORE_YIELDING + 2 * POLLS_PER_YIELD;
        let (value, waited) = Waiter::new(WaitPolicy::spin_us(MAX_SPIN_US)).wait_with(
            &mut count,
            poll_after(late),
            |_| unreachable!("never parks"),
        );
        assert_eq!((value, waited), (late + 1, Waited::Spun));
    }

    #[test]
    fn a_value_that_comes_after_the_window_is_taken_by_the_park() {
        let (sender, queue) = crossbeam_channel::bounded(1);
        let sending = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            sender.send(9u32).unwrap();
        });
        let started = Instant::now();
        let (result, waited) = Waiter::new(WaitPolicy::spin_us(50)).receive(&queue);
        sending.join().unwrap();
        assert_eq!((result, waited), (Ok(9), Waited::Parked));
        assert!(started.elapsed() >= Duration::from_millis(25));
    }

    #[test]
    fn a_window_of_zero_parks_after_one_poll() {
        let mut count = 0;
        let (value, waited) =
            Waiter::new(WaitPolicy::PARK).wait_with(&mut count, poll_after(5), |count| {
                *count += 100;
                *count
            });
        assert_eq!((value, waited), (101, Waited::Parked));
    }

    #[test]
    fn a_closed_channel_ends_every_kind_of_wait() {
        for policy in [WaitPolicy::PARK, WaitPolicy::spin_us(5)] {
            let (sender, queue) = crossbeam_channel::bounded::<u32>(1);
            drop(sender);
            let (result, _) = Waiter::new(policy).receive(&queue);
            assert_eq!(result, Err(RecvError));
        }
    }

    #[test]
    fn windows_are_parsed_and_bounded() {
        assert_eq!(WaitPolicy::parse("0"), Ok(WaitPolicy::PARK));
        assert_eq!(
            WaitPolicy::parse(" 200 ").map(WaitPolicy::window_us),
            Ok(200)
        );
        assert_eq!(
            WaitPolicy::parse("10000").map(WaitPolicy::window_us),
            Ok(MAX_SPIN_US)
        );
        let too_long = WaitPolicy::parse("10001").unwrap_err();
        assert!(too_long.to_string().contains("at most 10000"), "{too_long}");
        let not_a_number = WaitPolicy::parse("soon").unwrap_err();
        assert!(
            not_a_number
                .to_string()
                .contains("\"soon\" is not a spin window"),
            "{not_a_number}"
        );
        assert!(WaitPolicy::checked(u64::MAX).is_err());
        assert!(WaitPolicy::parse("-1").is_err());
    }
}
