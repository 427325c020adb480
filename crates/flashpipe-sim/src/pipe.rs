//! A pipe: one direction of a link with a bandwidth and a latency (an inter-controller
//! cable, a host's PCIe link). A message holds the pipe for its bytes at the pipe's rate,
//! one after the other in the order sent, then takes the latency to arrive; arrivals keep
//! the order of sending whatever extra delay a message is given (a slow sender), as a
//! stream does.

/// One direction of a link: latency, bandwidth and when it is next free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipe {
    latency_ns: u64,
    bytes_per_second: u64,
    free_at_ns: u64,
    last_arrival_ns: u64,
    bytes_sent: u64,
}

impl Pipe {
    /// A pipe with this latency and rate; a rate of 0 carries any message in no time
    /// (latency only).
    pub fn new(latency_ns: u64, bytes_per_second: u64) -> Pipe {
        Pipe {
            latency_ns,
            bytes_per_second,
            free_at_ns: 0,
            last_arrival_ns: 0,
            bytes_sent: 0,
        }
    }

    /// How long `bytes` hold the pipe.
    pub fn serialization_ns(&self, bytes: u64) -> u64 {
        if self.bytes_per_second == 0 {
            return 0;
        }
        let ns = u128::from(bytes) * 1_000_000_000 / u128::from(self.bytes_per_second);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// Sends `bytes` at `now_ns` with `extra_ns` of delay on top; returns when they arrive
    /// (never before a message sent earlier).
    pub fn send(&mut self, now_ns: u64, bytes: u64, extra_ns: u64) -> u64 {
        let start_ns = self.free_at_ns.max(now_ns);
        self.free_at_ns = start_ns.saturating_add(self.serialization_ns(bytes));
        let arrival_ns = self
            .free_at_ns
            .saturating_add(self.latency_ns)
            .saturating_add(extra_ns);
        self.last_arrival_ns = self.last_arrival_ns.max(arrival_ns);
        self.bytes_sent += bytes;
        self.last_arrival_ns
    }

    /// Bytes sent so far.
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_queue_for_the_bandwidth_then_take_the_latency() {
        let mut pipe = Pipe::new(500, 1_000_000_000);
        assert_eq!(pipe.serialization_ns(8_192), 8_192);
        assert_eq!(pipe.send(0, 8_192, 0), 8_692);
        assert_eq!(
            pipe.send(0, 8_192, 0),
            16_884,
            "the second waits for the first"
        );
        assert_eq!(
            pipe.send(100_000, 100, 0),
            100_600,
            "an idle pipe starts at once"
        );
        assert_eq!(pipe.bytes_sent(), 16_484);
    }

    #[test]
    fn extra_delay_never_reorders() {
        let mut pipe = Pipe::new(500, 0);
        let slow = pipe.send(0, 10, 50_000);
        let fast = pipe.send(10, 10, 0);
        assert_eq!(slow, 50_500);
        assert_eq!(fast, slow, "a later message waits for an earlier slow one");
    }
}
