//! How the server's threads wait for each other: the device worker for jobs, each
//! connection's writer for replies. Parking costs the sender a futex wake (about as much
//! as a small request on a 2-vCPU guest, the engine's finding in issue #13); spinning for
//! a window first lets a request at queue depth 1 pass reader -> worker -> writer with no
//! wake at all, at the price of a core busy for the window after each request.
//!
//! `spin_us = 0` parks at once (the default: an idle server burns nothing); the lead
//! compares settings side by side with `flashpipe bench net --flashpipe-spin-us 0,50,200`.
//! The window is read on the device layer's `RealClock`, as the engine's is.

use crossbeam_channel::{Receiver, RecvError, TryRecvError};
use flashpipe_device::RealClock;

/// Polls between two looks at the clock.
const POLLS_PER_CLOCK_READ: u32 = 64;
/// Polls before the spinner starts yielding its core now and then.
const POLLS_BEFORE_YIELDING: u32 = 128;

/// Receives from `receiver`, spinning up to `spin_us` microseconds before parking.
pub fn receive<T>(receiver: &Receiver<T>, spin_us: u64) -> Result<T, RecvError> {
    if spin_us > 0 {
        let clock = RealClock::shared();
        let deadline_ns = clock.now_ns().saturating_add(spin_us.saturating_mul(1000));
        let mut polls: u32 = 0;
        loop {
            match receiver.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {}
            }
            polls = polls.wrapping_add(1);
            if polls % POLLS_PER_CLOCK_READ == 0 && clock.now_ns() >= deadline_ns {
                break;
            }
            if polls > POLLS_BEFORE_YIELDING && polls % 16 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
    receiver.recv()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receives_spinning_and_parked_and_sees_disconnection() {
        for spin_us in [0, 50] {
            let (sender, receiver) = crossbeam_channel::unbounded();
            let thread = std::thread::spawn(move || sender.send(7u32).unwrap());
            assert_eq!(receive(&receiver, spin_us).unwrap(), 7);
            thread.join().unwrap();
            assert!(receive(&receiver, spin_us).is_err());
        }
    }
}
