//! The node's doorbell (docs/design/25-cluster-shm.md, "One doorbell for a router with
//! several inputs"): the router thread parks on it; every producer rings it. Peers of a
//! shared-memory link ring it through their own mapping (its descriptor went to them in
//! the set-up); the threads of this process (TCP readers and writers, the accept and dial
//! threads handing over a connection, the stop) ring it through [`NodeBell`], which also
//! raises a flag the router's poll looks at, since their inputs are channels the doorbell
//! cannot see.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use flashpipe_shm::{Doorbell, SharedMemoryError};

/// The in-process producers' side of the node's doorbell.
pub(crate) struct NodeBell {
    producer: Mutex<Doorbell>,
    offered: Doorbell,
    rung: AtomicBool,
}

/// The name the doorbell's memfd shows in `/proc/<pid>/fd`.
const DOORBELL_NAME: &str = "flashpipe-node-doorbell";

impl NodeBell {
    /// A new doorbell: the router's handle (the consumer) and the producers' side.
    pub fn create() -> Result<(Doorbell, NodeBell), SharedMemoryError> {
        let consumer = Doorbell::create(DOORBELL_NAME)?;
        let again = || -> Result<Doorbell, SharedMemoryError> {
            let fd = consumer.as_fd().try_clone_to_owned().map_err(|source| {
                SharedMemoryError::System {
                    region: DOORBELL_NAME.to_string(),
                    operation: "dup",
                    source,
                }
            })?;
            Doorbell::attach(fd)
        };
        let bell = NodeBell {
            producer: Mutex::new(again()?),
            offered: again()?,
            rung: AtomicBool::new(false),
        };
        Ok((consumer, bell))
    }

    /// Wakes the router: something came on a channel, or the node is stopping.
    pub fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        let mut producer = self
            .producer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        producer.ring();
    }

    /// Whether a producer of this process rang since the last [`NodeBell::take`].
    pub fn rung(&self) -> bool {
        self.rung.load(Ordering::SeqCst)
    }

    /// Clears the flag before the router drains its inputs.
    pub fn take(&self) -> bool {
        self.rung.swap(false, Ordering::SeqCst)
    }

    /// The handle whose descriptor a shared-memory set-up hands to the peer.
    pub fn offered(&self) -> &Doorbell {
        &self.offered
    }
}
