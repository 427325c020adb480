//! [`SimNbdDevice`]: the NBD client over a simulated link ([`SimNetwork`]), a
//! [`BlockDevice`] in virtual time for the deterministic simulation.
//!
//! It is the real client's protocol and policy (`flashpipe_nbd_client::core`: cookies, frames, reply
//! decoding and checks, admission, the durability ledger, the reconnect policy) driven by
//! the network's events instead of threads and sockets: `submit` encodes a request's
//! frames and hands them to the link; `poll_completions` runs the events due and decodes
//! what reached this device; `wait_completions` runs the network's events in time order
//! until one of its requests completes. A lost connection starts the same recovery as
//! the real client's: every request not answered is kept, reconnect attempts are
//! scheduled in virtual time with the real client's backoff, and on success the requests
//! are sent again in submission order (flushes too); when the attempts run out every one
//! of them, and every later submission, fails with an error naming the device
//! (`nbd+sim://NODE/`). The reply timeout is a timer event in virtual time applying the
//! core's rule, so a partition (no reset) is noticed as on real sockets.
//!
//! Every member of a striped stack shares one [`SimNetwork`], so waiting on one member
//! moves the others' replies along, in virtual-time order.

// Requests in flight move as boxes between the table and the recovery's list (a
// `Box<Parent>` is moved, never copied), so lists of boxes are meant.
#![allow(clippy::vec_box)]

use std::collections::BTreeMap;
use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, Rejected, Request,
};

use crate::wire;

use crate::client::sim_network::{sim_node_uri, Delivery, SimNetwork};
use flashpipe_nbd_client::core::{
    cookie_of_reply, describe_reply_header_error, encode_request_frames, parent_id_of_cookie,
    pending_part, read_reply_body, silence_ends_connection, ClientCore, ClientPolicy,
    NbdDeviceCounters, Parent, ReconnectDurability, RecoveryStep, ReplyRules,
};
use flashpipe_nbd_client::NbdExport;

/// How to open a simulated NBD device.
#[derive(Debug, Clone, Copy)]
pub struct SimNbdDeviceConfig {
    /// The node (an index of the network).
    pub node: usize,
    /// Most requests in flight.
    pub queue_depth: u32,
    /// Device block size (a power of two of at least 512 bytes).
    pub block_size_bytes: u32,
    /// Send writes with FUA.
    pub write_with_fua: bool,
    /// Reconnect attempts after a lost connection before requests fail.
    pub reconnect_attempts: u32,
    /// Wait before the first attempt (virtual time); doubled each time, at most 1 s.
    pub reconnect_first_delay_ms: u64,
    /// What a flush says after a reconnect.
    pub reconnect_durability: ReconnectDurability,
    /// How long (virtual time) requests in flight may go without a byte from the node
    /// before the connection counts as lost; 0: no limit.
    pub reply_timeout_ms: u64,
}

impl SimNbdDeviceConfig {
    /// The real client's defaults for node `node` with `block_size_bytes` blocks:
    /// queue depth 32, 5 attempts from 50 ms, unflushed writes reported, 30 s reply
    /// timeout.
    pub fn new(node: usize, block_size_bytes: u32) -> SimNbdDeviceConfig {
        SimNbdDeviceConfig {
            node,
            queue_depth: 32,
            block_size_bytes,
            write_with_fua: false,
            reconnect_attempts: 5,
            reconnect_first_delay_ms: 50,
            reconnect_durability: ReconnectDurability::default(),
            reply_timeout_ms: 30_000,
        }
    }
}

/// Where the device's one connection stands.
#[derive(Debug)]
enum LinkState {
    /// Requests go on this connection.
    Connected(u64),
    /// Lost; attempt `attempt` is scheduled; `pending` waits to be sent again.
    Reconnecting {
        attempt: u32,
        pending: Vec<Box<Parent>>,
        lost_because: String,
    },
    /// Reconnecting failed for good.
    Failed,
}

/// The NBD client over a simulated link.
pub struct SimNbdDevice {
    core: ClientCore,
    network: SimNetwork,
    node: usize,
    clock: Arc<dyn Clock>,
    link: LinkState,
    /// Requests sent on the live connection, by parent id.
    sent: BTreeMap<u64, Box<Parent>>,
    /// Reply timeout in nanoseconds; 0: none.
    reply_timeout_ns: u64,
    /// When a byte was last sent or received (virtual time).
    last_activity_ns: u64,
    /// Whether a timer tick is on its way.
    tick_armed: bool,
}

impl std::fmt::Debug for SimNbdDevice {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SimNbdDevice")
            .field("info", self.core.info())
            .field("link", &self.link)
            .field("in_flight", &self.core.in_flight())
            .finish_non_exhaustive()
    }
}

fn check_block_size(block: u32, export: &NbdExport) -> Result<u64, String> {
    if !block.is_power_of_two() || block < 512 {
        return Err(format!(
            "device block size {block} is not a power of two of at least 512 bytes"
        ));
    }
    if block % export.minimum_block_bytes != 0 || block > export.maximum_payload_bytes {
        return Err(format!(
            "device block size {block} does not suit the export (minimum block {}, maximum payload {})",
            export.minimum_block_bytes, export.maximum_payload_bytes
        ));
    }
    let block_count = export.size_bytes / u64::from(block);
    if block_count == 0 {
        return Err(format!(
            "the export holds {} bytes, less than one {block}-byte block",
            export.size_bytes
        ));
    }
    Ok(block_count)
}

impl SimNbdDevice {
    /// Connects to node `config.node` of `network` (at once, without faults). Errors are
    /// [`DeviceErrorKind::Open`] naming the device.
    pub fn open(
        network: &SimNetwork,
        config: SimNbdDeviceConfig,
    ) -> Result<SimNbdDevice, DeviceError> {
        let name: Arc<str> = if config.node < network.node_count() {
            Arc::from(sim_node_uri(&network.node_name(config.node)))
        } else {
            Arc::from(format!("nbd+sim://node-{}/", config.node))
        };
        let open_error = |detail: String| DeviceError::new(&name, DeviceErrorKind::Open { detail });
        flashpipe_device::request::check_queue_depth(&name, config.queue_depth)?;
        let (connection, export) = network.connect_now(config.node).map_err(open_error)?;
        let block_count = check_block_size(config.block_size_bytes, &export).map_err(open_error)?;
        let info = DeviceInfo {
            name: Arc::clone(&name),
            block_size_bytes: config.block_size_bytes,
            block_count,
            queue_depth: config.queue_depth,
        };
        let policy = ClientPolicy {
            write_with_fua: config.write_with_fua,
            read_only: false,
            reconnect_attempts: config.reconnect_attempts,
            reconnect_first_delay_ms: config.reconnect_first_delay_ms,
            reconnect_durability: config.reconnect_durability,
        };
        Ok(SimNbdDevice {
            core: ClientCore::new(info, export, policy),
            network: network.clone(),
            node: config.node,
            clock: network.clock().as_clock(),
            link: LinkState::Connected(connection),
            sent: BTreeMap::new(),
            reply_timeout_ns: config.reply_timeout_ms.saturating_mul(1_000_000),
            last_activity_ns: network.now_ns(),
            tick_armed: false,
        })
    }

    /// Connections lost, reconnects, requests re-issued.
    pub fn counters(&self) -> NbdDeviceCounters {
        self.core.counters()
    }

    /// Why the device failed for good, once it has.
    pub fn failure(&self) -> Option<&str> {
        self.core.failure()
    }

    fn send(&mut self, connection: u64, parent: Box<Parent>) {
        let mut frames = Vec::new();
        encode_request_frames(&parent, &mut frames);
        self.sent.insert(parent.id, parent);
        self.network.send_to_node(self.node, connection, frames);
        self.last_activity_ns = self.clock.now_ns();
        self.arm_tick(self.last_activity_ns);
    }

    /// Sets the reply timeout's timer to `since_ns` plus the timeout, unless one is set.
    fn arm_tick(&mut self, since_ns: u64) {
        if self.reply_timeout_ns == 0 || self.tick_armed {
            return;
        }
        self.tick_armed = true;
        let at_ns = since_ns.saturating_add(self.reply_timeout_ns);
        self.network.schedule_tick(self.node, at_ns);
    }

    /// The timer: the core's reply-timeout rule on the live connection.
    fn tick(&mut self) {
        self.tick_armed = false;
        let LinkState::Connected(connection) = self.link else {
            return;
        };
        let quiet_for_ns = self.clock.now_ns().saturating_sub(self.last_activity_ns);
        let waiting = self.sent.len();
        let name = Arc::clone(&self.core.info().name);
        match silence_ends_connection(&name, waiting, quiet_for_ns, self.reply_timeout_ns) {
            Some(reason) => self.lose(connection, reason),
            None if waiting > 0 => self.arm_tick(self.last_activity_ns),
            None => {}
        }
    }

    /// Runs the network's due events and takes in what reached this device.
    fn take_in(&mut self) {
        for delivery in self.network.take_deliveries(self.node) {
            self.handle(delivery);
        }
    }

    fn handle(&mut self, delivery: Delivery) {
        match (delivery, &self.link) {
            (Delivery::Tick, _) => self.tick(),
            (Delivery::Reply { connection, bytes }, LinkState::Connected(live))
                if connection == *live =>
            {
                self.last_activity_ns = self.clock.now_ns();
                if let Err(reason) = self.take_reply(&bytes) {
                    self.lose(connection, reason);
                }
            }
            (Delivery::Lost { connection, reason }, LinkState::Connected(live))
                if connection == *live =>
            {
                let reason = format!("{}: {reason}", self.core.info().name);
                self.lose(connection, reason);
            }
            (Delivery::Connected { connection, export }, LinkState::Reconnecting { .. }) => {
                match self.core.check_same_export(&export) {
                    Ok(()) => self.reconnected(connection),
                    Err(reason) => {
                        self.network.close(self.node, connection);
                        self.attempt_failed(reason);
                    }
                }
            }
            (Delivery::Refused { reason }, LinkState::Reconnecting { .. }) => {
                self.attempt_failed(format!("cannot connect: {reason}"));
            }
            // Replies and resets of connections given up, and outcomes of attempts no
            // one waits for (the device failed), are stale.
            _ => {}
        }
    }

    /// Decodes one reply message with the real client's code.
    fn take_reply(&mut self, bytes: &[u8]) -> Result<(), String> {
        let name = Arc::clone(&self.core.info().name);
        let mut input = bytes;
        let header = wire::read_reply_header(&mut input)
            .map_err(|error| describe_reply_header_error(&name, error))?;
        let cookie = cookie_of_reply(&header);
        let Some(mut parent) = self.sent.remove(&parent_id_of_cookie(cookie)) else {
            return Err(format!(
                "{name}: protocol violation: a reply for cookie {cookie:#x}, which no request in flight carries"
            ));
        };
        let rules = ReplyRules {
            device_name: &name,
            structured_replies: self.core.export().structured_replies,
        };
        let outcome = pending_part(&parent, cookie, &name)
            .and_then(|part| read_reply_body(&mut input, &mut parent, part, &header, &rules));
        let outcome = outcome.and_then(|finished| {
            if input.is_empty() {
                Ok(finished)
            } else {
                Err(format!(
                    "{name}: protocol violation: {} bytes after a reply",
                    input.len()
                ))
            }
        });
        match outcome {
            Ok(true) => self.core.complete_parent(parent),
            Ok(false) => {
                self.sent.insert(parent.id, parent);
            }
            Err(reason) => {
                self.sent.insert(parent.id, parent);
                return Err(reason);
            }
        }
        Ok(())
    }

    /// The live connection is lost: keep every request not answered and start the
    /// recovery the core decides.
    fn lose(&mut self, connection: u64, reason: String) {
        self.network.close(self.node, connection);
        let pending: Vec<Box<Parent>> = std::mem::take(&mut self.sent).into_values().collect();
        match self.core.begin_recovery(pending) {
            RecoveryStep::GiveUp(pending, why) => self.fail(pending, &reason, &why),
            RecoveryStep::Reconnect(pending) => {
                self.link = LinkState::Reconnecting {
                    attempt: 0,
                    pending,
                    lost_because: reason,
                };
                self.schedule_attempt(0);
            }
        }
    }

    fn schedule_attempt(&mut self, attempt: u32) {
        if attempt >= self.core.policy().reconnect_attempts {
            self.attempt_failed_for_good("no attempt made (reconnect_attempts is 0)".to_string());
            return;
        }
        let delay_ns = self
            .core
            .policy()
            .reconnect_delay_ms(attempt)
            .saturating_mul(1_000_000);
        self.network.schedule_connect(self.node, delay_ns);
    }

    fn attempt_failed(&mut self, reason: String) {
        let LinkState::Reconnecting { attempt, .. } = &mut self.link else {
            return;
        };
        *attempt += 1;
        let next = *attempt;
        if next >= self.core.policy().reconnect_attempts {
            self.attempt_failed_for_good(reason);
        } else {
            self.schedule_attempt(next);
        }
    }

    fn attempt_failed_for_good(&mut self, last_attempt: String) {
        match std::mem::replace(&mut self.link, LinkState::Failed) {
            LinkState::Reconnecting {
                pending,
                lost_because,
                ..
            } => self.fail(pending, &lost_because, &last_attempt),
            other => self.link = other,
        }
    }

    fn fail(&mut self, pending: Vec<Box<Parent>>, lost_because: &str, last_attempt: &str) {
        self.link = LinkState::Failed;
        self.core
            .fail_everything(pending, lost_because, last_attempt);
    }

    fn reconnected(&mut self, connection: u64) {
        match std::mem::replace(&mut self.link, LinkState::Connected(connection)) {
            LinkState::Reconnecting { pending, .. } => {
                for parent in self.core.reissue(pending) {
                    self.send(connection, parent);
                }
            }
            other => {
                self.network.close(self.node, connection);
                self.link = other;
            }
        }
    }
}

impl BlockDevice for SimNbdDevice {
    fn info(&self) -> &DeviceInfo {
        self.core.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        let Some(parent) = self.core.admit(request)? else {
            return Ok(());
        };
        match &mut self.link {
            LinkState::Connected(connection) => {
                let connection = *connection;
                self.send(connection, parent);
            }
            // Sent after the reconnect, after the requests submitted before it.
            LinkState::Reconnecting { pending, .. } => pending.push(parent),
            LinkState::Failed => unreachable!("a failed device refuses submissions"),
        }
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.take_in();
        self.core.hand_over(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        loop {
            self.take_in();
            if let Some(answer) = self.core.hand_over_without_waiting(completions) {
                return answer;
            }
            if !self.network.run_next_event() {
                let detail = format!(
                    "the simulated network has no event pending with {} requests in flight",
                    self.core.in_flight()
                );
                return Err(DeviceError::new(
                    &self.core.info().name,
                    DeviceErrorKind::IoFailed { detail },
                ));
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.core.in_flight()
    }
}

impl Drop for SimNbdDevice {
    /// Closes the connection, or stops waiting for one; requests still in flight are
    /// dropped with it.
    fn drop(&mut self) {
        match self.link {
            LinkState::Connected(connection) => self.network.close(self.node, connection),
            LinkState::Reconnecting { .. } => self.network.cancel_connect(self.node),
            LinkState::Failed => {}
        }
    }
}
