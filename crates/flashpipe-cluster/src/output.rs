//! One output port of a node (paper section III): frames the router sends on that port
//! wait in a bounded queue per virtual channel and input port; a rotating-priority arbiter
//! per datapath (request, write data, read data, ack) picks among the input ports, another
//! rotates among the datapaths that have a frame and a token, and on a link the
//! end-to-end tokens ([`crate::credits::CreditSender`]) hold a datapath at zero until the
//! receiver gives tokens back. Credit frames go first, outside the channels.

use std::collections::VecDeque;

use crate::arbiter::RoundRobin;
use crate::credits::{CreditError, CreditSender};
use crate::router::{Output, Port};
use crate::wire::{Channel, Credit, Frame, Message};

/// The input index of a port: host 0, device 1, link `i` at `2 + i`.
pub fn input_of(port: Port) -> usize {
    match port {
        Port::Host => 0,
        Port::Device => 1,
        Port::Link(link) => 2 + link,
    }
}

/// The input index of the node's own device port.
pub const DEVICE_INPUT: usize = 1;

/// The port at input `index`: the inverse of [`input_of`].
pub fn port_of(index: usize) -> Port {
    match index {
        0 => Port::Host,
        DEVICE_INPUT => Port::Device,
        link => Port::Link(link - 2),
    }
}

/// A node's outputs on their way to the stages, as the node process and the simulated
/// node both hold them: per input, the outputs of its frames that did not fit their stage
/// yet, in order. Each node says how it queues one output; pushing and flushing, which
/// keep every input's outputs in order, are written here once.
pub trait LeftoverOutputs {
    /// The outputs of frames from `input` still waiting for room on their stage, in order
    /// (`None` past the node's last input).
    fn leftovers(&mut self, input: usize) -> Option<&mut VecDeque<Output>>;

    /// The stage of `port` while the port is attached; `None` drops what is sent there.
    fn attached_stage(&mut self, port: Port) -> Option<&mut OutputStage>;

    /// Queues `output` on its port's stage (or drops it where the port is not attached),
    /// or hands it back when the stage is full.
    fn deliver(&mut self, output: Output) -> Result<(), Box<Output>> {
        match self.attached_stage(output.port) {
            Some(stage) => stage.push_output(output),
            None => Ok(()),
        }
    }

    /// Queues each output behind the leftovers of the input it came from; one that does
    /// not fit waits among them.
    fn push_outputs(&mut self, outputs: Vec<Output>) {
        for output in outputs {
            let input = input_of(output.from);
            let waiting = self
                .leftovers(input)
                .expect("an output from an input of the node");
            if !waiting.is_empty() {
                waiting.push_back(output);
                continue;
            }
            if let Err(output) = self.deliver(output) {
                self.leftovers(input)
                    .expect("the same input")
                    .push_back(*output);
            }
        }
    }

    /// Moves leftovers onto their stages, each input's in order, until a stage is full;
    /// whether any moved.
    fn flush_leftovers(&mut self) -> bool {
        let mut moved = false;
        let mut input = 0;
        while self.leftovers(input).is_some() {
            while let Some(output) = self.leftovers(input).and_then(VecDeque::pop_front) {
                if let Err(output) = self.deliver(output) {
                    self.leftovers(input)
                        .expect("the same input")
                        .push_front(*output);
                    break;
                }
                moved = true;
            }
            input += 1;
        }
        moved
    }
}

/// Why a frame was not queued (the frame is handed back; nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// The queue of this channel and input is full: hold the input until [`OutputStage::next_frame`]
    /// frees a place.
    #[error("output queue full for that channel and input; hold the input")]
    QueueFull {
        /// The frame, handed back.
        frame: Box<Frame>,
    },
    /// An input index past the stage's inputs.
    #[error("input {input} does not exist (the stage has {inputs})")]
    NoSuchInput {
        /// The input.
        input: usize,
        /// Inputs.
        inputs: usize,
    },
}

/// One output port's queues, arbiters and tokens.
#[derive(Debug)]
pub struct OutputStage {
    /// Frames by channel (code order), then by input.
    queues: Vec<Vec<VecDeque<Frame>>>,
    queue_limit: usize,
    input_arbiters: Vec<RoundRobin>,
    channel_arbiter: RoundRobin,
    tokens: Option<CreditSender>,
    credits: VecDeque<Credit>,
}

impl OutputStage {
    /// A fresh stage for `port` of a node with `inputs` inputs, holding `queue_limit`
    /// frames per queue: a link's stage holds `link_window` tokens per channel, the host's
    /// and the device's none.
    pub fn for_port(
        port: Port,
        inputs: usize,
        queue_limit: usize,
        link_window: u32,
    ) -> OutputStage {
        let window = matches!(port, Port::Link(_)).then_some(link_window);
        OutputStage::new(inputs, queue_limit, window)
    }

    /// A stage for `inputs` input ports, holding `queue_limit` frames per channel and input;
    /// `window` tokens per channel on a link (`None` on the host and device ports, which
    /// need no end-to-end flow control).
    pub fn new(inputs: usize, queue_limit: usize, window: Option<u32>) -> OutputStage {
        assert!(
            queue_limit > 0,
            "a stage holds at least one frame per queue"
        );
        OutputStage {
            queues: vec![vec![VecDeque::new(); inputs]; Channel::ALL.len()],
            queue_limit,
            input_arbiters: vec![RoundRobin::new(inputs); Channel::ALL.len()],
            channel_arbiter: RoundRobin::new(Channel::ALL.len()),
            tokens: window.map(CreditSender::new),
            credits: VecDeque::new(),
        }
    }

    /// Frames waiting (credits included).
    pub fn queued(&self) -> usize {
        let frames: usize = self.queues.iter().flatten().map(VecDeque::len).sum();
        frames + self.credits.len()
    }

    /// Tokens left on a channel of a link's stage (`None` on a port without end-to-end
    /// flow control): a stage whose peer has returned every token holds its whole window.
    pub fn tokens(&self, channel: Channel) -> Option<u32> {
        self.tokens.as_ref().map(|tokens| tokens.tokens(channel))
    }

    /// Queues a credit frame from input `input` (credit frames are never refused: they take
    /// no token and their queue is bounded by the tokens they return).
    pub fn push_credit(&mut self, input: usize, credit: Credit) {
        let frame = Frame {
            hops: 0,
            message: Message::Credit(credit),
        };
        assert!(
            self.push(input, frame).is_ok(),
            "credit frames are never refused"
        );
    }

    /// Queues a frame from an input port.
    pub fn push(&mut self, input: usize, frame: Frame) -> Result<(), OutputError> {
        let inputs = self.input_arbiters[0].inputs();
        if input >= inputs {
            return Err(OutputError::NoSuchInput { input, inputs });
        }
        let Some(channel) = Channel::of(&frame.message) else {
            if let Message::Credit(credit) = frame.message {
                self.credits.push_back(credit);
            }
            return Ok(());
        };
        let queue = &mut self.queues[usize::from(channel.code())][input];
        if queue.len() >= self.queue_limit {
            return Err(OutputError::QueueFull {
                frame: Box::new(frame),
            });
        }
        queue.push_back(frame);
        Ok(())
    }

    /// Queues a router output: its frame, from the input of the port it came from. A full
    /// queue hands the output back, for the caller to hold that input. Panics when that
    /// input is not one of the stage's (a node makes every port an input of every stage).
    pub fn push_output(&mut self, output: Output) -> Result<(), Box<Output>> {
        match self.push(input_of(output.from), output.frame) {
            Ok(()) => Ok(()),
            Err(OutputError::QueueFull { frame }) => Err(Box::new(Output {
                frame: *frame,
                ..output
            })),
            Err(error @ OutputError::NoSuchInput { .. }) => {
                unreachable!("every port is an input of every stage: {error}")
            }
        }
    }

    /// Takes back tokens the receiver returned.
    pub fn on_credit(&mut self, credit: Credit) -> Result<(), CreditError> {
        match &mut self.tokens {
            Some(tokens) => tokens.on_credit(credit),
            None => Ok(()),
        }
    }

    /// The next frame to send, if any may go: credits first, then the datapaths in
    /// rotating priority among those with a frame and a token, each picking an input in
    /// rotating priority.
    pub fn next_frame(&mut self) -> Option<Frame> {
        if let Some(credit) = self.credits.pop_front() {
            return Some(Frame {
                hops: 0,
                message: Message::Credit(credit),
            });
        }
        let ready: Vec<bool> = Channel::ALL
            .iter()
            .map(|&channel| {
                let waiting = self.queues[usize::from(channel.code())]
                    .iter()
                    .any(|queue| !queue.is_empty());
                let has_token = self
                    .tokens
                    .as_ref()
                    .is_none_or(|tokens| tokens.tokens(channel) > 0);
                waiting && has_token
            })
            .collect();
        let channel = self.channel_arbiter.pick(&ready)?;
        let queues = &mut self.queues[channel];
        let waiting: Vec<bool> = queues.iter().map(|queue| !queue.is_empty()).collect();
        let input = self.input_arbiters[channel]
            .pick(&waiting)
            .expect("a ready channel has a waiting input");
        if let Some(tokens) = &mut self.tokens {
            assert!(
                tokens.try_spend(Channel::ALL[channel]),
                "a ready channel has a token"
            );
        }
        queues[input].pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Status, WireAck};
    use flashpipe_flash::{AckStatus, CommandKind, FlashAddress, FlashCommand, FlashRequest};

    fn ack(tag: u64) -> Frame {
        Frame::from(WireAck {
            tag,
            host: 0,
            kind: CommandKind::Erase,
            status: Status::Flash(AckStatus::CLEAN),
            payload: None,
        })
    }

    fn write(tag: u64) -> Frame {
        let address = FlashAddress {
            device: 0,
            bus: 0,
            chip: 0,
            block: 0,
            page: 0,
        };
        Frame::from(FlashRequest {
            tag,
            host: 0,
            command: FlashCommand::WritePage {
                address,
                data: vec![],
                spare: vec![],
            },
        })
    }

    fn tag_of(frame: Frame) -> u64 {
        match frame.message {
            Message::Ack(ack) => ack.tag,
            Message::Request(request) => request.tag,
            Message::Credit(credit) => u64::from(credit.count) + 1000,
        }
    }

    #[test]
    fn inputs_take_turns_on_a_datapath() {
        let mut stage = OutputStage::new(3, 8, None);
        for round in 0..3 {
            for input in 0..3 {
                stage.push(input, ack(10 * input as u64 + round)).unwrap();
            }
        }
        let order: Vec<u64> = std::iter::from_fn(|| stage.next_frame())
            .map(tag_of)
            .collect();
        assert_eq!(order, [0, 10, 20, 1, 11, 21, 2, 12, 22]);
    }

    #[test]
    fn datapaths_take_turns_and_wait_for_tokens() {
        let mut stage = OutputStage::new(2, 8, Some(1));
        for tag in 0..2 {
            stage.push(0, write(tag)).unwrap();
            stage.push(1, ack(100 + tag)).unwrap();
        }
        assert_eq!(tag_of(stage.next_frame().unwrap()), 0, "write data first");
        assert_eq!(
            tag_of(stage.next_frame().unwrap()),
            100,
            "then the ack datapath"
        );
        assert!(
            stage.next_frame().is_none(),
            "both datapaths wait for a token"
        );
        stage
            .on_credit(Credit {
                channel: Channel::Ack,
                count: 1,
            })
            .unwrap();
        stage
            .push(
                0,
                Frame {
                    hops: 0,
                    message: Message::Credit(Credit {
                        channel: Channel::ReadData,
                        count: 4,
                    }),
                },
            )
            .unwrap();
        assert_eq!(
            tag_of(stage.next_frame().unwrap()),
            1004,
            "credits go first"
        );
        assert_eq!(tag_of(stage.next_frame().unwrap()), 101);
        assert!(stage.next_frame().is_none());
        assert_eq!(stage.queued(), 1);
        assert_eq!(stage.tokens(Channel::Ack), Some(0));
        assert_eq!(stage.tokens(Channel::Request), Some(1));
        assert_eq!(OutputStage::new(1, 1, None).tokens(Channel::Ack), None);
    }

    #[test]
    fn a_full_queue_hands_the_frame_back() {
        let mut stage = OutputStage::new(1, 1, None);
        stage.push(0, ack(1)).unwrap();
        let Err(OutputError::QueueFull { frame }) = stage.push(0, ack(2)) else {
            panic!("the queue holds one frame");
        };
        assert_eq!(*frame, ack(2));
        assert!(matches!(
            stage.push(1, ack(3)),
            Err(OutputError::NoSuchInput { .. })
        ));
        assert_eq!(input_of(Port::Link(1)), 3);
    }
}
