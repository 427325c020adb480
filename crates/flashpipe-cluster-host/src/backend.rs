//! The cluster as a [`FlashBackend`]: the host FTL drives a [`HostSession`] through a
//! [`ClusterView`].
//!
//! `submit` rewrites the FTL's request (host 0, a view address) into the host's request
//! at its cluster address and sends it; past the session's tag budget it hands the
//! request back (`QueueFull`), so the FTL keeps it in its backlog. Acks keep their tag,
//! so the FTL sees the ack of the request it sent; a read's page comes back with it.
//! `poll_acks` never blocks; `wait_acks` spins briefly, then blocks on the connection,
//! never longer than the session's ack timeout. Time is the wall clock ([`RealClock`]):
//! the nodes pace their devices to it.
//!
//! Fail-stop: a status the flash does not give (`Unreachable`, `NotOwner`, `UnknownHost`,
//! or a request the session failed itself) means the FTL's picture of the array can no
//! longer be trusted (programs and erases in flight may or may not have happened), so the
//! backend stops: it records the first such fault ([`ClusterFault`], naming the device,
//! the hop and the status, readable through a [`FaultHandle`]) and from then on sends
//! nothing to the cluster. It still answers every request the FTL has outstanding and
//! every later one, at once and without touching the cluster (reads as erased pages,
//! programs and erases as done), so no loop of the FTL waits for an ack that never comes
//! (a power cut, as `PowerCutFlash` models one, rather than a hang). Those answers are
//! not true: the owner of the FTL (the store's cluster device) checks the handle, fails
//! every operation from the fault on with a device error naming it, and never unmounts
//! the FTL; the next mount recovers from what is on flash, which holds every operation
//! the FTL saw acknowledged before the fault.

use std::any::Any;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use flashpipe_cluster::wire::{Status, WireAck};
use flashpipe_device::{Clock, RealClock};
use flashpipe_flash::{
    Ack, AckStatus, CommandKind, FlashAddress, FlashConfig, FlashRequest, SubmitError,
};
use flashpipe_ftl::FlashBackend;

use crate::handshake::HandshakeError;
use crate::loaded::{load_description, LoadError};
use crate::session::{HostSession, SessionAck, SessionOptions, SessionSubmitError};
use crate::view::{ClusterView, ViewError};
use crate::words::{kind_name, status_words};

/// Why the backend stopped (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("device {device} failed a {kind} at hop {hop}: {status}{}", detail.as_ref().map_or_else(String::new, |detail| format!("; {detail}")))]
pub struct ClusterFault {
    /// The cluster device (node id) the request was for.
    pub device: u32,
    /// Links the request had crossed where it failed (0: the host's own link).
    pub hop: u8,
    /// What kind of request.
    pub kind: &'static str,
    /// The status in words.
    pub status: String,
    /// What the host saw, when it failed the request itself.
    pub detail: Option<String>,
}

/// A handle on a backend's fault, readable after the FTL owns the backend.
#[derive(Debug, Clone, Default)]
pub struct FaultHandle(Arc<Mutex<Option<ClusterFault>>>);

impl FaultHandle {
    /// The fault, once there is one.
    pub fn get(&self) -> Option<ClusterFault> {
        self.0.lock().map_or(None, |fault| fault.clone())
    }

    fn set_first(&self, fault: ClusterFault) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(fault);
        }
    }
}

/// Why the backend could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ClusterOpenError {
    /// The description or the key.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The host's view.
    #[error("cluster description {path}: {error}")]
    View {
        /// The description.
        path: String,
        /// Why.
        error: ViewError,
    },
    /// The connection to the host's node.
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
}

/// A host's FTL backend over the cluster (see the module doc).
pub struct ClusterFlash {
    session: HostSession,
    view: ClusterView,
    clock: Arc<RealClock>,
    fault: FaultHandle,
    /// The FTL's requests not yet answered: tag -> (kind, submitted at).
    outstanding: HashMap<u64, (CommandKind, u64)>,
    limit: usize,
    buffer: Vec<SessionAck>,
}

impl ClusterFlash {
    /// Opens host `host` of the cluster `description`: loads it, builds the host's view
    /// (`blocks_per_chip`: [`ClusterView::of_host`]) and connects to the host's node.
    pub fn open(
        description: &Path,
        host: u32,
        blocks_per_chip: Option<u32>,
        options: SessionOptions,
    ) -> Result<ClusterFlash, ClusterOpenError> {
        let loaded = load_description(description)?;
        let view =
            ClusterView::of_host(&loaded.description, host, blocks_per_chip).map_err(|error| {
                ClusterOpenError::View {
                    path: description.display().to_string(),
                    error,
                }
            })?;
        let session = HostSession::open(&loaded, host, options)?;
        Ok(ClusterFlash {
            session,
            view,
            clock: Arc::new(RealClock::new()),
            fault: FaultHandle::default(),
            outstanding: HashMap::new(),
            limit: options.in_flight_limit,
            buffer: Vec::new(),
        })
    }

    /// The host's view of the cluster.
    pub fn view(&self) -> &ClusterView {
        &self.view
    }

    /// The session underneath (its counts).
    pub fn session(&self) -> &HostSession {
        &self.session
    }

    /// A handle on the backend's fault.
    pub fn fault_handle(&self) -> FaultHandle {
        self.fault.clone()
    }

    fn stopped(&self) -> bool {
        self.fault.get().is_some()
    }

    /// Converts the session's acks into `acks`; a non-flash status stops the backend.
    fn convert(&mut self, acks: &mut Vec<Ack>) -> usize {
        let now_ns = self.clock.now_ns();
        let mut moved = 0;
        for SessionAck {
            ack,
            device,
            failure,
            ..
        } in std::mem::take(&mut self.buffer)
        {
            let WireAck {
                tag,
                kind,
                status,
                payload,
                ..
            } = ack;
            let flash_status = match status {
                Status::Flash(flash_status) if failure.is_none() => flash_status,
                status => {
                    let hop = match status {
                        Status::Unreachable { hop, .. } => hop,
                        _ => 0,
                    };
                    self.fault.set_first(ClusterFault {
                        device,
                        hop,
                        kind: kind_name(kind),
                        status: status_words(&status),
                        detail: failure.map(|failure| failure.to_string()),
                    });
                    break;
                }
            };
            let Some((_, submitted_ns)) = self.outstanding.remove(&tag) else {
                continue;
            };
            let (data, spare) = match payload {
                Some(page) if kind == CommandKind::Read => (Some(page.data), Some(page.spare)),
                _ => (None, None),
            };
            acks.push(Ack {
                tag,
                host: 0,
                kind,
                status: flash_status,
                data,
                spare,
                submitted_ns,
                completed_ns: now_ns,
            });
            moved += 1;
        }
        if self.stopped() {
            moved += self.answer_outstanding(acks);
        }
        moved
    }

    /// Once stopped: answers every outstanding request without the cluster (see the
    /// module doc), in tag order.
    fn answer_outstanding(&mut self, acks: &mut Vec<Ack>) -> usize {
        let now_ns = self.clock.now_ns();
        let geometry = &self.view.config().geometry;
        let page_bytes = geometry.page_data_bytes as usize;
        let spare_bytes = self.view.config().host_spare_bytes() as usize;
        let mut tags: Vec<u64> = self.outstanding.keys().copied().collect();
        tags.sort_unstable();
        for &tag in &tags {
            let (kind, submitted_ns) = self.outstanding.remove(&tag).expect("listed above");
            let read = kind == CommandKind::Read;
            acks.push(Ack {
                tag,
                host: 0,
                kind,
                status: AckStatus::CLEAN,
                data: read.then(|| vec![0xFF; page_bytes]),
                spare: read.then(|| vec![0xFF; spare_bytes]),
                submitted_ns,
                completed_ns: now_ns,
            });
        }
        tags.len()
    }
}

impl FlashBackend for ClusterFlash {
    fn config(&self) -> &FlashConfig {
        self.view.config()
    }
    fn host_spare_bytes(&self) -> usize {
        self.view.config().host_spare_bytes() as usize
    }
    fn keeps_data(&self) -> bool {
        true
    }
    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }
    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
    fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        let tag = request.tag;
        let kind = request.command.kind();
        let previous = self.outstanding.insert(tag, (kind, self.clock.now_ns()));
        assert!(previous.is_none(), "tag {tag} submitted twice");
        if self.stopped() {
            return Ok(());
        }
        if self.session.in_flight() >= self.limit {
            self.outstanding.remove(&tag);
            return Err(SubmitError::QueueFull {
                host: request.host,
                queue_depth: self.limit as u32,
                request: Box::new(request),
            });
        }
        let device = self.view.devices()[request.command.address().device as usize].device;
        let cluster_request = FlashRequest {
            tag,
            host: self.session.host(),
            command: self.view.command_to_cluster(request.command),
        };
        match self.session.submit(cluster_request) {
            Ok(()) => {}
            Err(SessionSubmitError::Full { .. }) => {
                unreachable!("the in-flight count was checked above")
            }
            Err(error) => self.fault.set_first(ClusterFault {
                device,
                hop: 0,
                kind: kind_name(kind),
                status: "not sent".to_string(),
                detail: Some(error.to_string()),
            }),
        }
        Ok(())
    }
    fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        if !self.stopped() {
            self.session.poll(&mut self.buffer);
        }
        self.convert(acks)
    }
    fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        loop {
            if self.stopped() {
                return self.answer_outstanding(acks);
            }
            if self.session.wait(&mut self.buffer) == 0 {
                if self.outstanding.is_empty() {
                    return 0;
                }
                // Requests the FTL waits on that the session no longer carries: stop
                // rather than wait for acks that cannot come.
                let device = self.view.devices()[0].device;
                self.fault.set_first(ClusterFault {
                    device,
                    hop: 0,
                    kind: "request",
                    status: "lost".to_string(),
                    detail: Some(format!(
                        "{} requests have no ack and are no longer in flight",
                        self.outstanding.len()
                    )),
                });
                continue;
            }
            let moved = self.convert(acks);
            if moved > 0 {
                return moved;
            }
        }
    }
    fn factory_bad_without_data(&self, _address: FlashAddress) -> bool {
        false
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
