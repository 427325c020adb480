//! The state's write and read paths over a store in memory that keeps file bytes and counts
//! its commands: 1 MiB writes split as the kernel splits a buffer off a page go to the store
//! as whole chunks, a write kept back is sent before a read; reads split the same way are
//! served by the reads sent ahead, each byte read from the store once. Staged short writes:
//! a page rewritten many times and a run of appends reach the store as one write each, sent
//! before a read, a large write to the same file and a commit, with the newest bytes.

use std::collections::BTreeMap;

use flashpipe_api::{ApiError, Command, ErrorCode, FsStats, Reply};

use super::{staged, State};
use crate::instant_store::{Answers, Instant};

const MIB: usize = 1 << 20;

use flashpipe_api::VecPayloads as Memory;

/// Files as bytes; the lengths of the writes and reads the store was sent.
#[derive(Default)]
struct Bytes {
    files: BTreeMap<String, Vec<u8>>,
    writes: Vec<usize>,
    reads: Vec<u64>,
    /// The number of writes received when each flush came.
    flushes: Vec<usize>,
}

impl Answers for Bytes {
    fn answer(&mut self, command: Command<Memory>) -> Result<Reply<Memory>, ApiError> {
        match command {
            Command::List => Ok(Reply::List(Vec::new())),
            Command::Stats => Ok(Reply::Stats(FsStats {
                fs_block_size_bytes: 4096,
                fs_block_count: 1 << 20,
                used_blocks: 0,
                shared_blocks: 0,
                saved_blocks: 0,
                free_blocks: 1 << 20,
                pending_free_blocks: 0,
                reserved_blocks: 0,
                file_count: 0,
                commit_sequence: 1,
                unflushed_changes: false,
            })),
            Command::Write {
                name,
                offset_bytes,
                data,
            } => {
                let file = self.files.entry(name).or_default();
                let end = offset_bytes as usize + data.len();
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[offset_bytes as usize..end].copy_from_slice(&data);
                self.writes.push(data.len());
                Ok(Reply::Written { buffer: data })
            }
            Command::Read {
                name,
                offset_bytes,
                length_bytes,
            } => {
                let file = self.files.get(&name).cloned().unwrap_or_default();
                let start = (offset_bytes as usize).min(file.len());
                let end = (start + length_bytes as usize).min(file.len());
                self.reads.push(length_bytes);
                Ok(Reply::Data(file[start..end].to_vec()))
            }
            Command::Flush => {
                self.flushes.push(self.writes.len());
                Ok(Reply::Done)
            }
            _ => Err(ApiError::new(ErrorCode::Internal, "not in this test")),
        }
    }
}

fn state() -> State<Instant<Bytes>> {
    State::load(Instant::new(Bytes::default()), false, 1 << 30)
        .unwrap_or_else(|(_, why)| panic!("{why}"))
}

fn pattern(length: usize) -> Vec<u8> {
    (0..length).map(|index| (index % 251) as u8).collect()
}

/// The kernel's requests for 1 MiB moves from a buffer `skew` bytes past a page (0 < skew <
/// 4096): the MiB spans 257 pages and a request holds 256, so one of 1 MiB less `skew`, then
/// one of `skew`, for `count` MiB.
fn split_requests(skew: usize, count: usize) -> Vec<(usize, usize)> {
    (0..count)
        .flat_map(|index| {
            let at = index * MIB;
            [(at, MIB - skew), (at + MIB - skew, skew)]
        })
        .collect()
}

#[test]
fn split_writes_go_to_the_store_as_whole_chunks_and_a_kept_one_before_a_read() {
    let data = pattern(4 * MIB);
    let mut state = state();
    let requests = split_requests(16, 4);
    assert_eq!(requests[0], (0, MIB - 16));
    for (offset, length) in &requests {
        state
            .write(2, "f", *offset as u64, &data[*offset..offset + length])
            .expect("write");
    }
    state.drain().expect("drain");
    assert_eq!(state.transport.store.writes, vec![MIB; 4], "whole chunks");
    assert!(state.transport.store.files["f"] == data);
    // a write one page short of a chunk alone is kept back; a read sends it first
    state.write(2, "g", 0, &data[..MIB - 4096]).expect("write");
    assert_eq!(state.transport.store.writes.len(), 4, "kept back");
    let (pieces, _) = state
        .read((3, "g"), 0, 4096, (MIB - 4096) as u64)
        .expect("read");
    assert!(pieces[0].bytes() == &data[..4096]);
    assert_eq!(
        state.transport.store.writes.len(),
        5,
        "sent before the read"
    );
}

#[test]
fn split_reads_in_order_are_served_by_the_reads_ahead_each_byte_read_once() {
    let size = 8 * MIB;
    let data = pattern(size);
    for skew in [16usize, 4_000] {
        let mut state = state();
        state
            .transport
            .store
            .files
            .insert("f".to_string(), data.clone());
        let mut got = Vec::new();
        for (offset, length) in split_requests(skew, 8) {
            let (pieces, _) = state
                .read((2, "f"), offset as u64, length as u64, size as u64)
                .expect("read");
            for piece in &pieces {
                got.extend_from_slice(piece.bytes());
            }
        }
        assert!(got == data, "skew {skew}: the file's bytes in order");
        let read: u64 = state.transport.store.reads.iter().sum();
        assert!(
            read <= size as u64 + 2 * MIB as u64,
            "skew {skew}: {read} bytes read from the store for {size}"
        );
    }
}

fn staging_state() -> State<Instant<Bytes>> {
    let mut state = state();
    state.stage_small_writes = true;
    state
}

#[test]
fn a_page_rewritten_and_a_run_of_appends_reach_the_store_once_before_a_read_or_commit() {
    let mut state = staging_state();
    for round in 0..100u8 {
        state.write(2, "index", 0, &[round; 8192]).expect("write");
    }
    for index in 0..16u64 {
        state
            .write(3, "log", index * 512, &[index as u8; 512])
            .expect("write");
    }
    assert!(state.transport.store.writes.is_empty(), "staged");
    let (pieces, _) = state.read((2, "index"), 0, 8192, 8192).expect("read");
    assert!(pieces[0].bytes() == [99u8; 8192], "the newest bytes");
    assert_eq!(
        state.transport.store.writes,
        vec![8192, 8192],
        "one write each"
    );
    state.write(3, "log", 8192, &[7; 512]).expect("write");
    state.commit(Some(3)).expect("fsync");
    assert_eq!(state.transport.store.writes.len(), 3);
    assert_eq!(
        state.transport.store.flushes,
        vec![3],
        "sent before the commit"
    );
    assert_eq!(state.transport.store.files["log"].len(), 8704);
    assert_eq!(state.transport.store.files["log"][8191], 15);
}

#[test]
fn a_large_write_after_staged_ones_lands_last_and_bounds_send_what_is_staged() {
    let mut state = staging_state();
    state.write(2, "f", 0, &[1; 4096]).expect("write");
    let large = pattern(MIB);
    state.write(2, "f", 0, &large).expect("write");
    state.drain().expect("drain");
    assert!(
        state.transport.store.files["f"] == large,
        "the large write wins"
    );
    assert_eq!(state.transport.store.writes, vec![4096, MIB]);
    let before = state.transport.store.writes.len();
    let piece = vec![3u8; 256 * 1024];
    for index in 0..(staged::STAGED_MOST_BYTES / piece.len()) as u64 + 1 {
        state
            .write(4, "g", index * 2 * piece.len() as u64, &piece)
            .expect("write");
    }
    assert!(
        state.transport.store.writes.len() > before,
        "past the bound every staged write is sent"
    );
    assert!(!state.staged.over_bounds());
}

#[test]
fn staged_writes_wait_their_age_at_most_on_the_committer_tick() {
    let mut state = staging_state();
    state.write(2, "f", 0, &[5; 100]).expect("write");
    let now = super::now_ns();
    state.commit_if_due(now);
    assert!(state.transport.store.writes.is_empty(), "young: kept");
    state.commit_if_due(now + staged::STAGED_MOST_AGE_NS);
    assert_eq!(state.transport.store.writes, vec![100], "old: sent");
    assert!(
        state.transport.store.flushes.is_empty(),
        "sent, not committed"
    );
}
