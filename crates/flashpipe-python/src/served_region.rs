//! Large reads through a server straight into this process's memory (protocol version
//! 6, docs/design/26-python.md "Fifth part"): the engine reads the file's blocks into a
//! sealed memfd this process created and registered ([`flashpipe_client::DestinationRegion`]),
//! and the numpy array is a view of this process's mapping of it ([`RegionBytes`]). One
//! copy in all (device to region), as a read by reference, with no pool window held.
//!
//! A region's descriptor rides on socket bytes, and the session's own connection moves
//! its frames into rings, so these reads go through a second connection of their own, on
//! the socket, opened at the first large read ([`RegionReads`]); a server older than
//! version 6 (or one that refuses the connection) leaves them to the copying path for
//! the rest of the session. One region (of at most 1 GiB) is kept for the next read once
//! its array has died (its pages are faulted in and registered already); regions of live arrays stay
//! registered until they die and are then unregistered or reused.

use std::path::PathBuf;
use std::sync::Arc;

use flashpipe_client::{
    Client, ClientError, ClientTransport, ConnectOptions, DestinationRegion, Response,
    ServerExpectation,
};
use flashpipe_protocol::RegionResponse;
use flashpipe_shm::SharedMemory;

use crate::error::StoreError;

/// Reads in flight into one region at most.
const READS_IN_FLIGHT: usize = 8;

/// Regions are sized in steps of this many bytes (so a region serves later reads of
/// about the same size).
const REGION_STEP_BYTES: u64 = 2 << 20;

/// The largest free region kept for the next read once its arrays died; a larger one is
/// given back (unregistered, its memory freed) as soon as no array holds it.
const KEPT_REGION_MAX_BYTES: usize = 1 << 30;

/// The alignment of a read-into's place in its region.
const ALIGNMENT_BYTES: u64 = flashpipe_protocol::REGION_OFFSET_ALIGNMENT_BYTES;

/// Name of the memfds (shown in `/proc/<pid>/maps` as `/memfd:<name>`).
const REGION_MEMORY_NAME: &str = "flashpipe-python-region";

/// `length` bytes at `start` of a region's memory in this process: what a numpy array
/// views. The region stays mapped (and is not read into again) while this lives.
pub struct RegionBytes {
    memory: Arc<SharedMemory>,
    start: usize,
    length: usize,
}

impl RegionBytes {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        assert!(self.start + self.length <= self.memory.size_bytes());
        // SAFETY: the window lies inside the mapping (asserted), which stays mapped while
        // `self.memory` lives; every read into it was answered before this value was made,
        // and the region is read into again only once no `RegionBytes` holds its memory
        // (`RegionReads::free_region` looks at the `Arc`'s count), so nothing writes these
        // bytes while they are borrowed.
        unsafe { std::slice::from_raw_parts(self.memory.as_mut_ptr().add(self.start), self.length) }
    }
}

/// Where the session's region reads stand.
enum Link {
    /// Not tried yet.
    Untried,
    /// The second connection and its registered regions.
    Ready(Box<RegionLink>),
    /// Not available through this server (older version, refused): copy instead.
    Unavailable,
}

struct RegionLink {
    client: Client,
    regions: Vec<DestinationRegion>,
    /// The store's block size, once a region registered told it.
    block_bytes: Option<u64>,
}

/// A served session's reads into registered regions (module doc).
pub struct RegionReads {
    socket: PathBuf,
    expect: ServerExpectation,
    link: Link,
}

impl RegionReads {
    /// Region reads through the server at `socket`, which must be run as `expect` says.
    pub fn new(socket: PathBuf, expect: ServerExpectation) -> RegionReads {
        RegionReads {
            socket,
            expect,
            link: Link::Untried,
        }
    }

    /// Region reads that never happen: every large read is copied (a session kept off
    /// shared memory).
    pub fn unavailable(socket: PathBuf, expect: ServerExpectation) -> RegionReads {
        RegionReads {
            socket,
            expect,
            link: Link::Unavailable,
        }
    }

    /// Reads `length_bytes` at `offset_bytes` of `name` into a region; `Ok(None)` when
    /// this server cannot (the caller copies instead).
    pub fn read(
        &mut self,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Option<RegionBytes>, StoreError> {
        let Some(link) = self.link() else {
            return Ok(None);
        };
        let result = link.read(name, offset_bytes, length_bytes);
        if let Err(StoreError::Served(ClientError::ConnectionLost(_) | ClientError::Closed(_))) =
            &result
        {
            self.link = Link::Untried;
        }
        result
    }

    /// The link, connecting it first when not tried yet; `None` when unavailable.
    fn link(&mut self) -> Option<&mut RegionLink> {
        if matches!(self.link, Link::Untried) {
            self.link = match self.connect() {
                Some(client) => Link::Ready(Box::new(RegionLink {
                    client,
                    regions: Vec::new(),
                    block_bytes: None,
                })),
                None => Link::Unavailable,
            };
        }
        match &mut self.link {
            Link::Ready(link) => Some(link),
            Link::Untried | Link::Unavailable => None,
        }
    }

    /// A second connection on the socket, when the server speaks region reads.
    fn connect(&self) -> Option<Client> {
        let options = ConnectOptions {
            expect: Some(self.expect.clone()),
            map_memory: false,
            client_name: format!("python regions (pid {})", std::process::id()),
            transport: ClientTransport::Socket,
            ..ConnectOptions::default()
        };
        Client::connect(&self.socket, options)
            .ok()
            .filter(Client::supports_regions)
    }
}

impl RegionLink {
    /// Reads into a free or new region (see [`RegionReads::read`]): planned on the
    /// block size known, planned again when the region registered tells another.
    fn read(
        &mut self,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Option<RegionBytes>, StoreError> {
        let mut block_bytes = self.block_bytes.unwrap_or(ALIGNMENT_BYTES);
        for _ in 0..2 {
            let plan = ReadPlan::new(self, block_bytes, offset_bytes, length_bytes);
            let Some(region) = self.region_for(plan.region_bytes())? else {
                return Ok(None);
            };
            if alignment_of(&region) != block_bytes {
                block_bytes = alignment_of(&region);
                continue;
            }
            plan.run(&mut self.client, &region, name)?;
            return Ok(Some(RegionBytes {
                memory: Arc::clone(region.memory()),
                start: plan.head_bytes as usize,
                length: length_bytes as usize,
            }));
        }
        Ok(None)
    }

    /// A free registered region of at least `size_bytes` (the smallest), or a new one;
    /// `None` when the server refuses to register one (its limits): copy instead.
    fn region_for(&mut self, size_bytes: u64) -> Result<Option<DestinationRegion>, StoreError> {
        self.forget_dead_regions()?;
        let fitting = self
            .regions
            .iter()
            .filter(|region| is_free(region) && region.size_bytes() as u64 >= size_bytes)
            .min_by_key(|region| region.size_bytes());
        if let Some(region) = fitting {
            return Ok(Some(region.clone()));
        }
        self.unregister_free(usize::MAX)?;
        let size = usize::try_from(size_bytes.next_multiple_of(REGION_STEP_BYTES))
            .map_err(|_| StoreError::Invalid(format!("{size_bytes} bytes do not fit in memory")))?;
        let memory = match SharedMemory::create(REGION_MEMORY_NAME, size) {
            Ok(memory) => memory,
            Err(_) => return Ok(None),
        };
        match self.client.register_region(Arc::new(memory)) {
            Ok(region) => {
                self.block_bytes = Some(alignment_of(&region));
                self.regions.push(region.clone());
                Ok(Some(region))
            }
            Err(ClientError::Remote(_)) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Unregisters the free regions past the one kept for the next read (at most
    /// [`KEPT_REGION_MAX_BYTES`]).
    fn forget_dead_regions(&mut self) -> Result<(), StoreError> {
        self.unregister_free(1)
    }

    /// Unregisters free regions, keeping the `keep` largest of those no larger than
    /// [`KEPT_REGION_MAX_BYTES`].
    fn unregister_free(&mut self, keep: usize) -> Result<(), StoreError> {
        let sizes: Vec<Option<usize>> = self
            .regions
            .iter()
            .map(|region| is_free(region).then(|| region.size_bytes()))
            .collect();
        for index in regions_to_give_back(&sizes, keep) {
            let region = self.regions.swap_remove(index);
            self.client.unregister_region(&region)?;
        }
        Ok(())
    }
}

/// Which regions to unregister, highest index first (so `swap_remove` leaves the others
/// where they are): of the free ones (`Some(size)`; `None` is a region an array holds),
/// every one larger than [`KEPT_REGION_MAX_BYTES`] and all but the `keep` largest of the
/// rest.
fn regions_to_give_back(sizes: &[Option<usize>], keep: usize) -> Vec<usize> {
    let mut free: Vec<(usize, usize)> = sizes
        .iter()
        .enumerate()
        .filter_map(|(index, size)| size.map(|size| (index, size)))
        .collect();
    free.sort_by_key(|&(_, size)| std::cmp::Reverse(size));
    let (keepable, too_large): (Vec<_>, Vec<_>) = free
        .into_iter()
        .partition(|&(_, size)| size <= KEPT_REGION_MAX_BYTES);
    let mut indices: Vec<usize> = keepable
        .into_iter()
        .skip(keep)
        .chain(too_large)
        .map(|(index, _)| index)
        .collect();
    indices.sort_unstable_by(|a, b| b.cmp(a));
    indices
}

/// What a read into `region` is cut on: the store's block, at least the region
/// offsets' alignment (both powers of two, so the larger is a multiple of the other).
fn alignment_of(region: &DestinationRegion) -> u64 {
    region.block_bytes().max(ALIGNMENT_BYTES)
}

/// True when no array holds the region's memory (only the registration does).
fn is_free(region: &DestinationRegion) -> bool {
    Arc::strong_count(region.memory()) == 1
}

/// How one read is cut: from the block (and 4096-byte) boundary at or before its
/// offset, in chunks of whole blocks of at most the server's read limit.
struct ReadPlan {
    first_offset_bytes: u64,
    head_bytes: u64,
    total_bytes: u64,
    block_bytes: u64,
    chunk_bytes: u64,
}

impl ReadPlan {
    fn new(link: &RegionLink, block_bytes: u64, offset_bytes: u64, length_bytes: u64) -> ReadPlan {
        let head_bytes = offset_bytes % block_bytes;
        let max_read_bytes = link.client.server_info().limits.max_read_bytes;
        let chunk_bytes = (max_read_bytes / block_bytes).max(1) * block_bytes;
        ReadPlan {
            first_offset_bytes: offset_bytes - head_bytes,
            head_bytes,
            total_bytes: head_bytes + length_bytes,
            block_bytes,
            chunk_bytes,
        }
    }

    /// Room the read needs: its bytes rounded up to whole blocks.
    fn region_bytes(&self) -> u64 {
        self.total_bytes.next_multiple_of(self.block_bytes).max(1)
    }

    /// Sends the chunks, several in flight, and waits for every answer (also after a
    /// failure, so no read into the region is left in flight).
    fn run(
        &self,
        client: &mut Client,
        region: &DestinationRegion,
        name: &str,
    ) -> Result<(), ClientError> {
        let mut next = 0u64;
        let mut pending = 0usize;
        let mut first_error = None;
        while next < self.total_bytes || pending > 0 {
            while first_error.is_none() && pending < READS_IN_FLIGHT && next < self.total_bytes {
                let length = self.chunk_bytes.min(self.total_bytes - next);
                let sent = client.submit_read_into(
                    region,
                    name,
                    self.first_offset_bytes + next,
                    length,
                    next,
                );
                match sent {
                    Ok(_) => pending += 1,
                    Err(error) => first_error = Some(error),
                }
                next += length;
            }
            if pending == 0 {
                break;
            }
            let answer = client.wait();
            pending -= 1;
            let failure = match answer {
                Ok((_, Ok(Response::Region(RegionResponse::ReadIntoDone { .. })))) => None,
                Ok((_, Ok(other))) => Some(ClientError::Protocol(format!(
                    "a {} answer to a read into a region",
                    other.name()
                ))),
                Ok((_, Err(remote))) => Some(ClientError::Remote(remote)),
                Err(error) => return Err(error),
            };
            if first_error.is_none() {
                first_error = failure;
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::{regions_to_give_back, KEPT_REGION_MAX_BYTES};

    const MIB: usize = 1 << 20;

    #[test]
    fn the_largest_free_region_up_to_the_bound_is_kept_and_held_ones_never_go() {
        let sizes = [Some(4 * MIB), None, Some(64 * MIB), Some(2 * MIB)];
        assert_eq!(regions_to_give_back(&sizes, 1), vec![3, 0]);
        assert_eq!(regions_to_give_back(&sizes, 0), vec![3, 2, 0]);
        assert!(regions_to_give_back(&[None, None], 1).is_empty());
    }

    #[test]
    fn a_free_region_past_the_bound_is_given_back_even_when_it_is_the_only_one() {
        let past = KEPT_REGION_MAX_BYTES + 2 * MIB;
        assert_eq!(regions_to_give_back(&[Some(past)], 1), vec![0]);
        assert_eq!(
            regions_to_give_back(&[Some(past), Some(KEPT_REGION_MAX_BYTES)], 1),
            vec![0],
            "the one at the bound is kept"
        );
    }
}
