//! Unit tests of one router.

use super::*;
use crate::shares::BlockRange;
use flashpipe_flash::{AckStatus, CommandKind, FlashAddress, FlashCommand};

fn config(device: u32) -> RouterConfig {
    RouterConfig {
        device,
        has_host: true,
        links: 2,
        next_hop: BTreeMap::from([(0, 0), (2, 1), (3, 1)]),
        tags: 2,
        queue_limit: 1,
        host_weights: vec![1, 1],
        costs: RequestCosts::REFLEX,
        shares: None,
    }
}

fn address(device: u32, block: u32) -> FlashAddress {
    FlashAddress {
        device,
        bus: 0,
        chip: 0,
        block,
        page: 0,
    }
}

fn read(tag: u64, host: u32, device: u32) -> Frame {
    Frame::from(FlashRequest {
        tag,
        host,
        command: FlashCommand::ReadPage {
            address: address(device, 0),
        },
    })
}

fn ack_for(output: &Output) -> Frame {
    let Message::Request(request) = &output.frame.message else {
        panic!("not a request");
    };
    Frame {
        hops: 9,
        message: Message::Ack(WireAck {
            tag: request.tag,
            host: request.host,
            kind: request.command.kind(),
            status: Status::Flash(AckStatus::CLEAN),
            payload: None,
        }),
    }
}

/// What `router` does with the first of `outputs` (of its peer) arriving on its link 0.
fn over_link(router: &mut Router, outputs: &[Output]) -> Vec<Output> {
    router
        .receive(Port::Link(0), outputs[0].frame.clone())
        .unwrap()
}

fn ack_of(output: &Output) -> &WireAck {
    let Message::Ack(ack) = &output.frame.message else {
        panic!("not an ack");
    };
    ack
}

#[test]
fn same_host_tags_from_two_ports_never_collide() {
    let mut router = Router::new(config(1)).unwrap();
    let from_host = router.receive(Port::Host, read(7, 0, 1)).unwrap();
    let from_link = router.receive(Port::Link(0), read(7, 1, 1)).unwrap();
    assert_eq!(from_host[0].port, Port::Device);
    assert_eq!(from_link[0].port, Port::Device);
    assert_ne!(
        from_host[0].frame, from_link[0].frame,
        "renamed to distinct tags"
    );
    let back = router
        .receive(Port::Device, ack_for(&from_link[0]))
        .unwrap();
    assert_eq!(back[0].port, Port::Link(0));
    assert_eq!(ack_of(&back[0]).tag, 7);
    assert_eq!(ack_of(&back[0]).host, 1);
    assert_eq!(
        back[0].frame.hops, 0,
        "the device's ack carries the request's hops"
    );
    let back = router
        .receive(Port::Device, ack_for(&from_host[0]))
        .unwrap();
    assert_eq!((back[0].port, ack_of(&back[0]).tag), (Port::Host, 7));
    router.assert_tags_balanced();
    assert_eq!(router.in_flight(), 0);
}

#[test]
fn requests_cross_links_with_hops_counted() {
    let mut router = Router::new(config(1)).unwrap();
    let out = router.receive(Port::Host, read(3, 0, 3)).unwrap();
    assert_eq!(out[0].port, Port::Link(1));
    assert_eq!(out[0].frame.hops, 1);
    let mut ack = ack_for(&out[0]);
    ack.hops = 2;
    let back = router.receive(Port::Link(1), ack).unwrap();
    assert_eq!(back[0].frame.hops, 2, "acks keep the hops of their request");
    let none = router.receive(Port::Host, read(4, 0, 9)).unwrap();
    assert_eq!(
        ack_of(&none[0]).status,
        Status::Unreachable { device: 9, hop: 0 }
    );
}

/// Checks that the host's `request` is held, nothing sent: `why`.
fn check_held(router: &mut Router, request: Frame, why: &str) {
    let sent = router.receive(Port::Host, request).unwrap();
    assert!(sent.is_empty(), "held ({why}), yet sent {sent:?}");
}

#[test]
fn a_full_free_queue_holds_then_answers_busy() {
    let mut router = Router::new(config(1)).unwrap();
    let first = router.receive(Port::Host, read(1, 0, 1)).unwrap();
    router.receive(Port::Host, read(2, 0, 1)).unwrap();
    check_held(&mut router, read(3, 0, 1), "the free queue holds it");
    assert_eq!(router.held(), 1);
    let busy = router.receive(Port::Host, read(4, 0, 1)).unwrap();
    assert_eq!(ack_of(&busy[0]).status, Status::Busy { queue_limit: 1 });
    assert_eq!(ack_of(&busy[0]).tag, 4);
    let out = router.receive(Port::Device, ack_for(&first[0])).unwrap();
    assert_eq!(
        out.len(),
        2,
        "the ack goes back and the held request gets the tag"
    );
    assert_eq!(out[1].port, Port::Device);
    assert_eq!(router.held(), 0);
    router.assert_tags_balanced();
}

#[test]
fn programs_outside_the_share_are_refused_before_the_device() {
    let mut config = config(1);
    config.shares = Some(Shares::new(1, 100, [(0, BlockRange { start: 0, end: 10 })]).unwrap());
    let mut router = Router::new(config).unwrap();
    let erase = |host, block| {
        Frame::from(FlashRequest {
            tag: 5,
            host,
            command: FlashCommand::EraseBlock {
                address: address(1, block),
            },
        })
    };
    let refused = router.receive(Port::Host, erase(1, 3)).unwrap();
    assert_eq!(refused[0].port, Port::Host);
    assert_eq!(
        ack_of(&refused[0]).status,
        Status::NotOwner {
            device: 1,
            block: 3
        }
    );
    let allowed = router.receive(Port::Host, erase(0, 3)).unwrap();
    assert_eq!(allowed[0].port, Port::Device);
}

#[test]
fn a_link_down_fails_its_requests_and_frees_their_tags() {
    let mut router = Router::new(config(1)).unwrap();
    router.receive(Port::Host, read(1, 0, 2)).unwrap();
    let from_left = router.receive(Port::Link(0), read(2, 1, 1)).unwrap();
    router.receive(Port::Host, read(3, 0, 2)).unwrap();
    let failed = router.link_down(1);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(ack_of(&failed[0]).tag, 1);
    assert_eq!(
        ack_of(&failed[0]).status,
        Status::Unreachable { device: 2, hop: 0 }
    );
    assert_eq!(
        (failed[1].port, ack_of(&failed[1]).tag),
        (Port::Host, 3),
        "the held request got the freed tag and found the link down"
    );
    router.assert_tags_balanced();
    assert_eq!(router.in_flight(), 1);
    let orphan = router.link_down(0);
    assert!(orphan.is_empty());
    assert!(router
        .receive(Port::Device, ack_for(&from_left[0]))
        .unwrap()
        .is_empty());
    assert_eq!(router.counters().orphan_acks, 1);
    assert_eq!(router.in_flight(), 0);
    assert_eq!(
        router.receive(Port::Link(0), read(1, 0, 1)),
        Err(RouterError::PortUnavailable)
    );
    router.assert_tags_balanced();
}

#[test]
fn a_host_down_orphans_its_requests_and_leaks_no_tag() {
    let mut router = Router::new(config(1)).unwrap();
    let to_device = router.receive(Port::Host, read(1, 0, 1)).unwrap();
    let to_link = router.receive(Port::Host, read(2, 0, 2)).unwrap();
    let second = router.receive(Port::Host, read(5, 0, 1)).unwrap();
    assert!(router
        .receive(Port::Host, read(3, 0, 1))
        .unwrap()
        .is_empty());
    assert!(router
        .receive(Port::Link(0), read(4, 1, 1))
        .unwrap()
        .is_empty());
    assert_eq!((router.in_flight(), router.held()), (3, 2));
    assert!(router.host_down().is_empty(), "no tag is free yet");
    assert_eq!(router.held(), 1, "the host's held request is forgotten");
    let late = router
        .receive(Port::Device, ack_for(&to_device[0]))
        .unwrap();
    assert_eq!(
        late.len(),
        1,
        "the late ack goes nowhere; the freed tag serves the link"
    );
    assert_eq!((late[0].port, late[0].from), (Port::Device, Port::Link(0)));
    assert!(router
        .receive(Port::Link(1), ack_for(&to_link[0]))
        .unwrap()
        .is_empty());
    assert!(router
        .receive(Port::Device, ack_for(&second[0]))
        .unwrap()
        .is_empty());
    assert_eq!(router.counters().orphan_acks, 3);
    assert_eq!((router.in_flight(), router.held()), (1, 0));
    router.assert_tags_balanced();
    let again = router.receive(Port::Host, read(1, 0, 1)).unwrap();
    assert_eq!(
        again[0].port,
        Port::Device,
        "a host connecting again is served"
    );
    router.assert_tags_balanced();
}

/// Two neighbours with one tag per output, each host sending a request to the other's
/// device at once. With one free queue for every output (the bug the cluster campaign
/// found), each router's only tag went to its host's request on the link, each request
/// then waited at the other router for a tag held by the other request, and neither ever
/// came back; with a queue per output both reach their devices.
#[test]
fn requests_crossing_a_link_both_ways_never_wait_for_each_others_tags() {
    let pair = |device: u32, other: u32| RouterConfig {
        device,
        has_host: true,
        links: 1,
        next_hop: BTreeMap::from([(other, 0)]),
        tags: 1,
        queue_limit: 4,
        host_weights: vec![1, 1],
        costs: RequestCosts::REFLEX,
        shares: None,
    };
    let mut left = Router::new(pair(0, 1)).unwrap();
    let mut right = Router::new(pair(1, 0)).unwrap();
    let rightward = left.receive(Port::Host, read(1, 0, 1)).unwrap();
    let leftward = right.receive(Port::Host, read(1, 1, 0)).unwrap();
    assert_eq!(
        (rightward[0].port, leftward[0].port),
        (Port::Link(0), Port::Link(0))
    );
    let at_right = over_link(&mut right, &rightward);
    let at_left = over_link(&mut left, &leftward);
    assert_eq!(
        at_right.len(),
        1,
        "the request crossing rightwards waits for no tag"
    );
    assert_eq!(
        at_left.len(),
        1,
        "the request crossing leftwards waits for no tag"
    );
    assert_eq!(
        (at_right[0].port, at_left[0].port),
        (Port::Device, Port::Device)
    );
    let back_right = right.receive(Port::Device, ack_for(&at_right[0])).unwrap();
    let back_left = left.receive(Port::Device, ack_for(&at_left[0])).unwrap();
    let home_left = over_link(&mut left, &back_right);
    let home_right = over_link(&mut right, &back_left);
    assert_eq!(
        (home_left[0].port, ack_of(&home_left[0]).tag),
        (Port::Host, 1)
    );
    assert_eq!(
        (home_right[0].port, ack_of(&home_right[0]).tag),
        (Port::Host, 1)
    );
    for router in [&left, &right] {
        router.assert_tags_balanced();
        assert_eq!((router.in_flight(), router.held()), (0, 0));
    }
}

/// A host's request waiting for a busy output does not hold back its request to another.
#[test]
fn a_request_waiting_for_its_output_does_not_block_another_output() {
    let mut router = Router::new(RouterConfig {
        queue_limit: 2,
        ..config(1)
    })
    .unwrap();
    router.receive(Port::Host, read(1, 0, 2)).unwrap();
    router.receive(Port::Host, read(2, 0, 2)).unwrap();
    check_held(&mut router, read(3, 0, 2), "link 1's tags are all out");
    let to_device = router.receive(Port::Host, read(4, 0, 1)).unwrap();
    assert_eq!(
        to_device[0].port,
        Port::Device,
        "the device's tags are its own"
    );
    assert_eq!(router.held(), 1);
    router.assert_tags_balanced();
}

#[test]
fn bad_frames_are_refused_and_change_nothing() {
    let mut router = Router::new(config(1)).unwrap();
    let out = router.receive(Port::Host, read(1, 0, 1)).unwrap();
    let mut forged = ack_for(&out[0]);
    assert_eq!(
        router.receive(Port::Link(0), forged.clone()),
        Err(RouterError::UnknownTag { tag: 0 })
    );
    if let Message::Ack(ack) = &mut forged.message {
        ack.tag = u64::MAX;
    }
    assert!(router.receive(Port::Device, forged).is_err());
    assert!(router.receive(Port::Device, read(1, 0, 1)).is_err());
    assert!(router.receive(Port::Host, ack_for(&out[0])).is_err());
    let unknown = router.receive(Port::Host, read(1, 7, 1)).unwrap();
    assert_eq!(
        ack_of(&unknown[0]).status,
        Status::UnknownHost {
            host: 7,
            host_count: 2
        }
    );
    assert_eq!(router.in_flight(), 1);
    router.assert_tags_balanced();
}

#[test]
fn bad_configurations_are_refused() {
    let mut zero = config(1);
    zero.tags = 0;
    assert!(matches!(
        Router::new(zero),
        Err(RouterConfigError::Zero { field: "tags" })
    ));
    let mut own = config(1);
    own.next_hop.insert(1, 0);
    assert!(matches!(
        Router::new(own),
        Err(RouterConfigError::OwnDeviceRouted { .. })
    ));
    let mut far = config(1);
    far.next_hop.insert(5, 2);
    assert!(matches!(
        Router::new(far),
        Err(RouterConfigError::NoSuchLink { .. })
    ));
}

/// Two backlogged hosts (one on the host port, one behind link 0) share one device whose
/// requests finish oldest first; returns the cost of what each host got served.
fn contend(kinds: [CommandKind; 2], completions: usize) -> [f64; 2] {
    let mut router = Router::new(config(1)).unwrap();
    let costs = RequestCosts::REFLEX;
    let mut at_device: VecDeque<Output> = VecDeque::new();
    let mut served = [0.0; 2];
    let mut tag = 0u64;
    for _ in 0..completions {
        for (host, port) in [(0u32, Port::Host), (1, Port::Link(0))] {
            tag += 1;
            let address = address(1, 0);
            let command = match kinds[host as usize] {
                CommandKind::Read => FlashCommand::ReadPage { address },
                _ => FlashCommand::WritePage {
                    address,
                    data: vec![],
                    spare: vec![],
                },
            };
            let frame = Frame {
                hops: 0,
                message: Message::Request(FlashRequest { tag, host, command }),
            };
            let out = router.receive(port, frame).unwrap();
            at_device.extend(out.into_iter().filter(|output| output.port == Port::Device));
        }
        let oldest = at_device.pop_front().expect("the device always has work");
        let host = ack_of_request_host(&oldest);
        served[host as usize] += f64::from(costs.of(kinds[host as usize]));
        let out = router.receive(Port::Device, ack_for(&oldest)).unwrap();
        at_device.extend(out.into_iter().filter(|output| output.port == Port::Device));
    }
    router.assert_tags_balanced();
    served
}

fn ack_of_request_host(output: &Output) -> u32 {
    let Message::Request(request) = &output.frame.message else {
        panic!("not a request");
    };
    request.host
}

#[test]
fn hosts_of_equal_weight_share_the_device_fairly() {
    let served = contend([CommandKind::Read, CommandKind::Read], 50_000);
    assert!(crate::arbiter::jain_index(&served) >= 0.99, "{served:?}");
}

#[test]
fn a_writing_host_cannot_take_more_than_its_share() {
    let served = contend([CommandKind::Write, CommandKind::Read], 50_000);
    let writer_share = served[0] / (served[0] + served[1]);
    assert!(
        writer_share <= 0.5 + 0.01,
        "writer took {writer_share} of {served:?}"
    );
    assert!(crate::arbiter::jain_index(&served) >= 0.99, "{served:?}");
}
