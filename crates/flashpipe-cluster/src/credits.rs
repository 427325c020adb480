//! Token-based end-to-end flow control per virtual channel (paper section III): a sender
//! spends one token per frame on a channel and waits at zero; the receiver, as it frees
//! the buffer a frame held, gives tokens back in Credit frames, batched so credits do not
//! double the traffic.

use crate::wire::{Channel, Credit};

/// The sending side: tokens left per channel.
#[derive(Debug, Clone)]
pub struct CreditSender {
    tokens: [u32; 4],
    window: u32,
}

/// Why a Credit frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreditError {
    /// The peer gave back more tokens than were spent: a broken or hostile peer.
    #[error(
        "peer returned {count} tokens on a channel holding {held} of {window}; close the link"
    )]
    TooManyTokens {
        /// Tokens returned.
        count: u32,
        /// Tokens held before.
        held: u32,
        /// The channel's window.
        window: u32,
    },
}

impl CreditSender {
    /// A sender with `window` tokens on each channel (the receiver's buffers per channel).
    pub fn new(window: u32) -> CreditSender {
        assert!(window > 0, "a channel needs at least one token");
        CreditSender {
            tokens: [window; 4],
            window,
        }
    }

    /// Tokens left on a channel.
    pub fn tokens(&self, channel: Channel) -> u32 {
        self.tokens[usize::from(channel.code())]
    }

    /// Spends a token to send one frame; false (nothing spent) when the channel must wait.
    pub fn try_spend(&mut self, channel: Channel) -> bool {
        let tokens = &mut self.tokens[usize::from(channel.code())];
        if *tokens == 0 {
            return false;
        }
        *tokens -= 1;
        true
    }

    /// Takes back the tokens of a Credit frame.
    pub fn on_credit(&mut self, credit: Credit) -> Result<(), CreditError> {
        let tokens = &mut self.tokens[usize::from(credit.channel.code())];
        let held = *tokens;
        match held.checked_add(credit.count) {
            Some(total) if total <= self.window => {
                *tokens = total;
                Ok(())
            }
            _ => Err(CreditError::TooManyTokens {
                count: credit.count,
                held,
                window: self.window,
            }),
        }
    }
}

/// The receiving side: frames taken off each channel whose tokens are not yet returned.
#[derive(Debug, Clone)]
pub struct CreditReceiver {
    owed: [u32; 4],
    batch: u32,
}

impl CreditReceiver {
    /// A receiver that returns tokens once `batch` are owed on a channel (1 returns each).
    pub fn new(batch: u32) -> CreditReceiver {
        assert!(batch > 0, "a batch holds at least one token");
        CreditReceiver {
            owed: [0; 4],
            batch,
        }
    }

    /// Records that a frame of `channel` left the receiver's buffer; returns a Credit frame
    /// when a batch is due.
    pub fn on_freed(&mut self, channel: Channel) -> Option<Credit> {
        let owed = &mut self.owed[usize::from(channel.code())];
        *owed += 1;
        if *owed < self.batch {
            return None;
        }
        let count = std::mem::take(owed);
        Some(Credit { channel, count })
    }

    /// Every token still owed, as Credit frames (when the link goes idle).
    pub fn flush(&mut self) -> Vec<Credit> {
        Channel::ALL
            .into_iter()
            .filter_map(|channel| {
                let count = std::mem::take(&mut self.owed[usize::from(channel.code())]);
                (count > 0).then_some(Credit { channel, count })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_waits_at_zero_and_resumes_on_credit() {
        let mut sender = CreditSender::new(2);
        let mut receiver = CreditReceiver::new(2);
        assert!(sender.try_spend(Channel::WriteData));
        assert!(sender.try_spend(Channel::WriteData));
        assert!(!sender.try_spend(Channel::WriteData));
        assert!(
            sender.try_spend(Channel::Request),
            "channels are independent"
        );
        assert_eq!(receiver.on_freed(Channel::WriteData), None);
        let credit = receiver.on_freed(Channel::WriteData).unwrap();
        assert_eq!(credit.count, 2);
        sender.on_credit(credit).unwrap();
        assert_eq!(sender.tokens(Channel::WriteData), 2);
    }

    #[test]
    fn flush_returns_what_is_owed_and_excess_is_refused() {
        let mut receiver = CreditReceiver::new(8);
        receiver.on_freed(Channel::Ack);
        receiver.on_freed(Channel::ReadData);
        receiver.on_freed(Channel::ReadData);
        let credits = receiver.flush();
        assert_eq!(
            credits,
            [
                Credit {
                    channel: Channel::ReadData,
                    count: 2
                },
                Credit {
                    channel: Channel::Ack,
                    count: 1
                }
            ]
        );
        assert!(receiver.flush().is_empty());
        let mut sender = CreditSender::new(4);
        assert!(sender
            .on_credit(Credit {
                channel: Channel::Ack,
                count: u32::MAX
            })
            .is_err());
        assert_eq!(
            sender.tokens(Channel::Ack),
            4,
            "a refused credit changes nothing"
        );
    }

    #[test]
    fn tokens_are_conserved_over_a_long_exchange() {
        let window = 4;
        let mut sender = CreditSender::new(window);
        let mut receiver = CreditReceiver::new(3);
        let mut in_buffer = 0u32;
        for step in 0..10_000u32 {
            if step % 3 != 2 && sender.try_spend(Channel::Request) {
                in_buffer += 1;
            } else if in_buffer > 0 {
                in_buffer -= 1;
                if let Some(credit) = receiver.on_freed(Channel::Request) {
                    sender.on_credit(credit).unwrap();
                }
            }
            assert!(
                in_buffer <= window,
                "the receiver never holds more than its window"
            );
        }
        for credit in receiver.flush() {
            sender.on_credit(credit).unwrap();
        }
        assert_eq!(sender.tokens(Channel::Request) + in_buffer, window);
    }
}
