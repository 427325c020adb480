//! Unit tests of the I/O-free transmission core: framing across inputs, credits,
//! completions out of order and every refusal.

use super::*;

const BLOCK: u32 = 512;

fn settings() -> CoreSettings {
    CoreSettings {
        size_bytes: 1 << 20,
        block_size_bytes: BLOCK,
        read_only: false,
        trim_reads_zeroes: false,
        structured_replies: false,
        base_allocation_context: None,
    }
}

fn request(command: u16, flags: u16, cookie: u64, offset_bytes: u64, length_bytes: u32) -> Vec<u8> {
    let mut bytes =
        RequestHeader::new(flags, command, cookie, offset_bytes, length_bytes).to_bytes();
    if command == CMD_WRITE {
        bytes.extend(std::iter::repeat_n(0x5a, length_bytes as usize));
    }
    bytes
}

fn simple(error: u32, cookie: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_simple_reply(&mut bytes, error, cookie);
    bytes
}

fn expect_job(step: Step) -> DeviceJob {
    match step {
        Step::Job(job) => job,
        other => panic!("expected a job, got {other:?}"),
    }
}

/// The error a single request gets, answered at once.
fn refusal_of(settings: CoreSettings, bytes: &[u8]) -> u32 {
    let mut core = NbdServerCore::new(settings, 4);
    core.receive(bytes);
    assert!(matches!(core.next_step(), Step::Answered));
    let replies = core.take_replies();
    assert_eq!(replies.len(), 1);
    let reply = &replies[0];
    assert_eq!(reply.len(), 16, "a simple reply with no data");
    let error = u32::from_be_bytes(reply[4..8].try_into().unwrap());
    assert_ne!(error, 0, "a refusal carries an error");
    assert_eq!(core.unanswered(), 0);
    assert!(matches!(core.next_step(), Step::NeedInput));
    error
}

#[test]
fn a_request_split_across_two_inputs_is_taken_when_whole() {
    let mut core = NbdServerCore::new(settings(), 4);
    let bytes = request(CMD_WRITE, 0, 7, 1024, BLOCK);
    core.receive(&bytes[..20]);
    assert!(matches!(core.next_step(), Step::NeedInput));
    core.receive(&bytes[20..100]);
    assert!(matches!(core.next_step(), Step::NeedInput));
    core.receive(&bytes[100..]);
    let job = expect_job(core.next_step());
    assert_eq!(job.cookie, 7);
    assert!(!job.force_unit_access);
    match job.kind {
        JobKind::Write {
            first_block,
            buffer,
        } => {
            assert_eq!(first_block, 2);
            assert_eq!(buffer.as_slice(), &[0x5a; BLOCK as usize][..]);
        }
        other => panic!("expected a write, got {other:?}"),
    }
    assert!(matches!(core.next_step(), Step::NeedInput));
    assert_eq!(core.buffered_bytes(), 0);
}

#[test]
fn two_requests_in_one_input_give_two_jobs() {
    let mut core = NbdServerCore::new(settings(), 4);
    let mut bytes = request(CMD_READ, 0, 1, 0, 2 * BLOCK);
    bytes.extend(request(CMD_FLUSH, 0, 2, 0, 0));
    core.receive(&bytes);
    let read = expect_job(core.next_step());
    assert_eq!(read.cookie, 1);
    assert!(matches!(
        read.kind,
        JobKind::Read {
            first_block: 0,
            block_count: 2
        }
    ));
    let flush = expect_job(core.next_step());
    assert_eq!(flush.cookie, 2);
    assert!(matches!(flush.kind, JobKind::Flush));
    assert!(matches!(core.next_step(), Step::NeedInput));
    assert_eq!(core.unanswered(), 2);
}

#[test]
fn completions_out_of_order_are_answered_in_completion_order() {
    let mut core = NbdServerCore::new(settings(), 4);
    let mut bytes = request(CMD_READ, 0, 1, 0, BLOCK);
    bytes.extend(request(CMD_WRITE, CMD_FLAG_FUA, 2, 0, BLOCK));
    core.receive(&bytes);
    let read = expect_job(core.next_step());
    let write = expect_job(core.next_step());
    assert!(write.force_unit_access);
    core.complete(OutgoingReply {
        cookie: write.cookie,
        body: ReplyBody::Done,
    });
    let mut data = IoBuf::zeroed(BLOCK as usize);
    data.as_mut_slice().fill(0xc3);
    core.complete(OutgoingReply {
        cookie: read.cookie,
        body: ReplyBody::Data {
            offset_bytes: 0,
            buffer: data,
        },
    });
    let replies = core.take_replies();
    let mut read_reply = simple(0, 1);
    read_reply.extend_from_slice(&[0xc3; BLOCK as usize]);
    assert_eq!(replies, vec![simple(0, 2), read_reply]);
    assert_eq!(core.unanswered(), 0);
}

#[test]
fn credits_bound_the_requests_unanswered() {
    let mut core = NbdServerCore::new(settings(), 2);
    let mut bytes = Vec::new();
    for cookie in 1..=3 {
        bytes.extend(request(CMD_FLUSH, 0, cookie, 0, 0));
    }
    core.receive(&bytes);
    let first = expect_job(core.next_step());
    expect_job(core.next_step());
    assert!(matches!(core.next_step(), Step::NeedCompletion));
    core.complete(OutgoingReply {
        cookie: first.cookie,
        body: ReplyBody::Done,
    });
    assert_eq!(expect_job(core.next_step()).cookie, 3);
    assert!(matches!(core.next_step(), Step::NeedCompletion));
}

#[test]
fn a_refusal_returns_its_credit_at_once() {
    let mut core = NbdServerCore::new(settings(), 1);
    let mut bytes = request(CMD_READ, 0, 1, 1, BLOCK);
    bytes.extend(request(CMD_READ, 0, 2, 0, BLOCK));
    core.receive(&bytes);
    assert!(matches!(core.next_step(), Step::Answered));
    assert_eq!(expect_job(core.next_step()).cookie, 2);
    assert_eq!(core.take_replies(), vec![simple(NBD_EINVAL, 1)]);
}

#[test]
fn every_refusal_has_its_error() {
    let base = settings();
    let read_only = CoreSettings {
        read_only: true,
        ..base
    };
    let big = CoreSettings {
        size_bytes: 1 << 40,
        ..base
    };
    let size = base.size_bytes;
    let cases: Vec<(&str, CoreSettings, Vec<u8>, u32)> = vec![
        (
            "flags",
            base,
            request(CMD_READ, CMD_FLAG_DF, 1, 0, BLOCK),
            NBD_EINVAL,
        ),
        (
            "flush range",
            base,
            request(CMD_FLUSH, 0, 1, BLOCK as u64, 0),
            NBD_EINVAL,
        ),
        ("unknown", base, request(99, 0, 1, 0, 0), NBD_EINVAL),
        (
            "read past end",
            base,
            request(CMD_READ, 0, 1, size, BLOCK),
            NBD_EINVAL,
        ),
        (
            "write past end",
            base,
            request(CMD_WRITE, 0, 1, size, BLOCK),
            NBD_ENOSPC,
        ),
        (
            "zeroes past end",
            base,
            request(CMD_WRITE_ZEROES, 0, 1, size, BLOCK),
            NBD_ENOSPC,
        ),
        (
            "offset overflow",
            base,
            request(CMD_TRIM, 0, 1, u64::MAX - 10, BLOCK),
            NBD_EINVAL,
        ),
        (
            "misaligned offset",
            base,
            request(CMD_READ, 0, 1, 3, BLOCK),
            NBD_EINVAL,
        ),
        (
            "misaligned length",
            base,
            request(CMD_TRIM, 0, 1, 0, 100),
            NBD_EINVAL,
        ),
        (
            "read-only write",
            read_only,
            request(CMD_WRITE, 0, 1, 0, BLOCK),
            NBD_EPERM,
        ),
        (
            "read-only trim",
            read_only,
            request(CMD_TRIM, 0, 1, 0, BLOCK),
            NBD_EPERM,
        ),
        (
            "read-only zeroes",
            read_only,
            request(CMD_WRITE_ZEROES, 0, 1, 0, BLOCK),
            NBD_EPERM,
        ),
        (
            "read too long",
            big,
            request(CMD_READ, 0, 1, 0, MAX_PAYLOAD_BYTES + BLOCK),
            NBD_EINVAL,
        ),
        (
            "block status without context",
            base,
            request(CMD_BLOCK_STATUS, 0, 1, 0, BLOCK),
            NBD_EINVAL,
        ),
        (
            "fast zero",
            base,
            request(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 1, 0, BLOCK),
            NBD_ENOTSUP,
        ),
    ];
    for (name, settings, bytes, error) in cases {
        assert_eq!(refusal_of(settings, &bytes), error, "case {name}");
    }
    let with_context = CoreSettings {
        structured_replies: true,
        base_allocation_context: Some(1),
        ..base
    };
    let mut core = NbdServerCore::new(with_context, 4);
    core.receive(&request(CMD_BLOCK_STATUS, 0, 9, 0, 0));
    assert!(matches!(core.next_step(), Step::Answered));
    let mut expected = Vec::new();
    encode_chunk_error(
        &mut expected,
        9,
        NBD_EINVAL,
        "NBD_CMD_BLOCK_STATUS of length 0",
    );
    assert_eq!(core.take_replies(), vec![expected]);
}

#[test]
fn cache_and_empty_ranges_succeed_at_once() {
    let mut core = NbdServerCore::new(settings(), 4);
    let mut bytes = request(CMD_CACHE, 0, 1, 0, BLOCK);
    bytes.extend(request(CMD_READ, 0, 2, 0, 0));
    core.receive(&bytes);
    assert!(matches!(core.next_step(), Step::Answered));
    assert!(matches!(core.next_step(), Step::Answered));
    assert_eq!(core.take_replies(), vec![simple(0, 1), simple(0, 2)]);
}

#[test]
fn write_zeroes_trims_where_holes_read_as_zeroes() {
    let trims = CoreSettings {
        trim_reads_zeroes: true,
        ..settings()
    };
    let mut core = NbdServerCore::new(trims, 4);
    let mut bytes = request(CMD_WRITE_ZEROES, 0, 1, 0, 2 * BLOCK);
    bytes.extend(request(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 2, 0, 2 * BLOCK));
    core.receive(&bytes);
    assert!(matches!(
        expect_job(core.next_step()).kind,
        JobKind::Trim {
            first_block: 0,
            block_count: 2
        }
    ));
    assert!(matches!(
        expect_job(core.next_step()).kind,
        JobKind::WriteZeroes {
            first_block: 0,
            block_count: 2
        }
    ));
}

#[test]
fn block_status_is_a_query_answered_by_a_chunk() {
    let with_context = CoreSettings {
        structured_replies: true,
        base_allocation_context: Some(3),
        trim_reads_zeroes: true,
        ..settings()
    };
    let mut core = NbdServerCore::new(with_context, 4);
    core.receive(&request(
        CMD_BLOCK_STATUS,
        CMD_FLAG_REQ_ONE,
        5,
        BLOCK as u64,
        4 * BLOCK,
    ));
    let query = match core.next_step() {
        Step::BlockStatus(query) => query,
        other => panic!("expected a query, got {other:?}"),
    };
    assert_eq!(
        (query.first_block, query.end_block, query.run_limit),
        (1, 5, 1)
    );
    let runs = [
        AllocationRun {
            block_count: 2,
            is_hole: true,
        },
        AllocationRun {
            block_count: 2,
            is_hole: false,
        },
    ];
    core.complete(query.reply(core.settings(), &runs));
    let mut expected = Vec::new();
    let extents = [BlockStatusExtent {
        length_bytes: 2 * BLOCK,
        flags: STATE_HOLE | STATE_ZERO,
    }];
    encode_chunk_block_status(&mut expected, 5, 3, &extents, true);
    assert_eq!(core.take_replies(), vec![expected]);
}

#[test]
fn structured_replies_are_chunks() {
    let structured = CoreSettings {
        structured_replies: true,
        ..settings()
    };
    let mut core = NbdServerCore::new(structured, 4);
    core.receive(&request(CMD_READ, CMD_FLAG_DF, 4, 0, BLOCK));
    let job = expect_job(core.next_step());
    core.complete(OutgoingReply {
        cookie: job.cookie,
        body: ReplyBody::Data {
            offset_bytes: 0,
            buffer: IoBuf::zeroed(BLOCK as usize),
        },
    });
    let mut expected = Vec::new();
    encode_chunk_offset_data_header(&mut expected, 4, 0, BLOCK, true);
    expected.extend_from_slice(&[0; BLOCK as usize]);
    assert_eq!(core.take_replies(), vec![expected]);
}

#[test]
fn a_wrong_magic_ends_reading_and_later_bytes_are_ignored() {
    let mut core = NbdServerCore::new(settings(), 4);
    let mut bytes = request(CMD_FLUSH, 0, 1, 0, 0);
    bytes[0] ^= 0xff;
    core.receive(&bytes);
    assert!(matches!(core.next_step(), Step::End(CoreEnd::Malformed(_))));
    core.receive(&request(CMD_FLUSH, 0, 2, 0, 0));
    assert!(matches!(core.next_step(), Step::End(CoreEnd::Malformed(_))));
    assert_eq!(core.buffered_bytes(), 0);
    assert!(core.take_replies().is_empty());
}

#[test]
fn a_write_over_the_payload_limit_ends_reading_before_its_payload() {
    let mut core = NbdServerCore::new(settings(), 4);
    let mut header = Vec::new();
    RequestHeader {
        flags: 0,
        command: CMD_WRITE,
        cookie: 1,
        offset_bytes: 0,
        length_bytes: MAX_PAYLOAD_BYTES + BLOCK,
    }
    .encode(&mut header);
    core.receive(&header);
    match core.next_step() {
        Step::End(CoreEnd::Malformed(message)) => assert!(message.contains("limit")),
        other => panic!("expected the end, got {other:?}"),
    }
}

#[test]
fn disconnect_ends_reading_but_jobs_in_flight_are_answered() {
    let mut core = NbdServerCore::new(settings(), 4);
    let mut bytes = request(CMD_FLUSH, 0, 1, 0, 0);
    bytes.extend(request(CMD_DISC, 0, 2, 0, 0));
    bytes.extend(request(CMD_FLUSH, 0, 3, 0, 0));
    core.receive(&bytes);
    let flush = expect_job(core.next_step());
    assert!(matches!(core.next_step(), Step::End(CoreEnd::Disconnect)));
    core.complete(OutgoingReply {
        cookie: flush.cookie,
        body: ReplyBody::Done,
    });
    assert_eq!(core.take_replies(), vec![simple(0, 1)]);
    assert!(matches!(core.next_step(), Step::End(CoreEnd::Disconnect)));
}

#[test]
fn a_device_error_is_answered_with_its_nbd_error() {
    let mut core = NbdServerCore::new(settings(), 4);
    core.receive(&request(CMD_READ, 0, 8, 0, BLOCK));
    let job = expect_job(core.next_step());
    core.complete(OutgoingReply {
        cookie: job.cookie,
        body: ReplyBody::Error {
            error: NBD_EIO,
            message: "the device failed".to_string(),
        },
    });
    assert_eq!(core.take_replies(), vec![simple(NBD_EIO, 8)]);
}
