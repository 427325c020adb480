//! A link: the timing and the failure chances of an ordered, delayed, two-way byte pipe.
//!
//! Each direction keeps its order, as a stream does: a message never arrives before one
//! sent earlier the same way, whatever delay it drew. Delays and failures are drawn from
//! the generator the caller passes (its component's stream), so the caller fixes the
//! order of draws and a seed fixes the history.

use flashpipe_base::SplitMix64;

/// How a link misbehaves: delays and the chances of each failure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFaults {
    /// Shortest one-way delay of a message, nanoseconds.
    pub delay_ns_min: u64,
    /// Longest one-way delay of a message, nanoseconds.
    pub delay_ns_max: u64,
    /// Longest time the far end takes to carry out one request, nanoseconds.
    pub service_ns_max: u64,
    /// Chance that a message is lost and its connection severed.
    pub sever_probability: f64,
    /// Chance that a message is lost silently and its connection with it (a partition:
    /// no reset reaches either side, so only a timeout notices).
    pub silent_loss_probability: f64,
    /// Chance that a reply arrives with a flipped bit (a protocol violation the receiver
    /// must end the connection on and recover from).
    pub garble_probability: f64,
    /// Chance that the far end closes the connection instead of serving a request.
    pub close_probability: f64,
    /// Chance that a connection attempt is refused.
    pub refuse_probability: f64,
}

/// A [`LinkFaults`] setting out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkFaultsError {
    /// The delay range is empty.
    #[error(
        "delay_ns_min {min_ns} above delay_ns_max {max_ns}; give a minimum at or below the maximum"
    )]
    DelayRange {
        /// The minimum given.
        min_ns: u64,
        /// The maximum given.
        max_ns: u64,
    },
    /// A chance outside 0 to 1.
    #[error("{name} {value} outside 0.0..=1.0; give a probability")]
    Probability {
        /// The field's name.
        name: &'static str,
        /// The value given.
        value: f64,
    },
}

impl LinkFaults {
    /// A link that never fails: 20 to 80 us each way, up to 30 us of service.
    pub fn reliable() -> LinkFaults {
        LinkFaults {
            delay_ns_min: 20_000,
            delay_ns_max: 80_000,
            service_ns_max: 30_000,
            sever_probability: 0.0,
            silent_loss_probability: 0.0,
            garble_probability: 0.0,
            close_probability: 0.0,
            refuse_probability: 0.0,
        }
    }

    /// Checks the delay range and every probability.
    pub fn validate(&self) -> Result<(), LinkFaultsError> {
        if self.delay_ns_min > self.delay_ns_max {
            return Err(LinkFaultsError::DelayRange {
                min_ns: self.delay_ns_min,
                max_ns: self.delay_ns_max,
            });
        }
        let probabilities = [
            ("sever_probability", self.sever_probability),
            ("silent_loss_probability", self.silent_loss_probability),
            ("garble_probability", self.garble_probability),
            ("close_probability", self.close_probability),
            ("refuse_probability", self.refuse_probability),
        ];
        for (name, value) in probabilities {
            if !(0.0..=1.0).contains(&value) {
                return Err(LinkFaultsError::Probability { name, value });
            }
        }
        Ok(())
    }
}

/// One two-way link: its faults and the last arrival each way.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    faults: LinkFaults,
    last_forward_arrival_ns: u64,
    last_backward_arrival_ns: u64,
}

impl Link {
    /// A link with `faults` (checked).
    pub fn new(faults: LinkFaults) -> Result<Link, LinkFaultsError> {
        faults.validate()?;
        Ok(Link {
            faults,
            last_forward_arrival_ns: 0,
            last_backward_arrival_ns: 0,
        })
    }

    /// The link's faults.
    pub fn faults(&self) -> &LinkFaults {
        &self.faults
    }

    /// Changes the link's faults from now on (a link that got slow or lossy); arrivals
    /// already promised keep their order.
    ///
    /// # Panics
    /// When `faults` is out of range (check it with [`LinkFaults::validate`]).
    pub fn set_faults(&mut self, faults: LinkFaults) {
        if let Err(error) = faults.validate() {
            panic!("link faults refused: {error}");
        }
        self.faults = faults;
    }

    /// Draws one one-way delay (one draw from `generator`).
    pub fn draw_delay_ns(&self, generator: &mut SplitMix64) -> u64 {
        self.faults.delay_ns_min
            + generator.below(self.faults.delay_ns_max - self.faults.delay_ns_min + 1)
    }

    /// When a message sent now on the forward way (towards the far end) arrives: a drawn
    /// delay, but never before the previous forward message.
    pub fn forward_arrival_ns(&mut self, now_ns: u64, generator: &mut SplitMix64) -> u64 {
        let at_ns = now_ns + self.draw_delay_ns(generator);
        self.last_forward_arrival_ns = self.last_forward_arrival_ns.max(at_ns);
        self.last_forward_arrival_ns
    }

    /// When a message sent now on the backward way (towards the near end) arrives.
    pub fn backward_arrival_ns(&mut self, now_ns: u64, generator: &mut SplitMix64) -> u64 {
        let at_ns = now_ns + self.draw_delay_ns(generator);
        self.last_backward_arrival_ns = self.last_backward_arrival_ns.max(at_ns);
        self.last_backward_arrival_ns
    }

    /// Draws whether a message is lost with its connection reset.
    pub fn draw_sever(&self, generator: &mut SplitMix64) -> bool {
        generator.chance(self.faults.sever_probability)
    }

    /// Draws whether a message is lost silently (a partition).
    pub fn draw_silent_loss(&self, generator: &mut SplitMix64) -> bool {
        generator.chance(self.faults.silent_loss_probability)
    }

    /// Draws whether a reply is garbled.
    pub fn draw_garble(&self, generator: &mut SplitMix64) -> bool {
        generator.chance(self.faults.garble_probability)
    }

    /// Draws whether the far end closes the connection on a request.
    pub fn draw_close(&self, generator: &mut SplitMix64) -> bool {
        generator.chance(self.faults.close_probability)
    }

    /// Draws whether a connection attempt is refused.
    pub fn draw_refuse(&self, generator: &mut SplitMix64) -> bool {
        generator.chance(self.faults.refuse_probability)
    }

    /// Draws a service time at the far end, up to [`LinkFaults::service_ns_max`].
    pub fn draw_service_ns(&self, generator: &mut SplitMix64) -> u64 {
        generator.below(self.faults.service_ns_max + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_direction_keeps_its_order_whatever_the_delays() {
        let mut link = Link::new(LinkFaults {
            delay_ns_min: 0,
            delay_ns_max: 1_000_000,
            ..LinkFaults::reliable()
        })
        .unwrap();
        let mut generator = SplitMix64::new(3);
        let mut last_ns = 0;
        for now_ns in (0..100u64).map(|step| step * 10) {
            let at_ns = link.forward_arrival_ns(now_ns, &mut generator);
            assert!(at_ns >= last_ns && at_ns >= now_ns);
            last_ns = at_ns;
        }
        let back_ns = link.backward_arrival_ns(0, &mut generator);
        assert!(back_ns <= 1_000_000, "the ways are independent");
    }

    #[test]
    fn bad_settings_are_refused_with_the_field_named() {
        let inverted = LinkFaults {
            delay_ns_min: 5,
            delay_ns_max: 4,
            ..LinkFaults::reliable()
        };
        assert!(Link::new(inverted)
            .unwrap_err()
            .to_string()
            .contains("delay_ns_min 5"));
        let chance = LinkFaults {
            garble_probability: 1.5,
            ..LinkFaults::reliable()
        };
        assert!(Link::new(chance)
            .unwrap_err()
            .to_string()
            .contains("garble_probability 1.5"));
    }

    #[test]
    fn a_reliable_link_never_fails() {
        let link = Link::new(LinkFaults::reliable()).unwrap();
        let mut generator = SplitMix64::new(9);
        for _ in 0..1000 {
            assert!(!link.draw_sever(&mut generator));
            assert!(!link.draw_silent_loss(&mut generator));
            assert!(!link.draw_garble(&mut generator));
            assert!(!link.draw_close(&mut generator));
            assert!(!link.draw_refuse(&mut generator));
            let delay_ns = link.draw_delay_ns(&mut generator);
            assert!((20_000..=80_000).contains(&delay_ns));
        }
    }
}
