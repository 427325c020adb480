//! Tests of the cluster description: a good line of four nodes, and one refusal per check.

use super::*;

const LINE: &str = r#"
version = 1

[[node]]
id = 0
address = "127.0.0.1:7400"
preset = "minflash"
image = "node0.img"
links = [1]

[[node]]
id = 1
address = "127.0.0.1:7401"
preset = "minflash"
image = "node1.img"
links = [2]

[[node]]
id = 2
address = "127.0.0.1:7402"
preset = "minflash"
image = "node2.img"
links = [1, 3]

[[node]]
id = 3
address = "127.0.0.1:7403"
preset = "minflash"
image = "node3.img"

[[host]]
id = 0
node = 0
shares = [{ device = 0, start = 0, end = 2048 }, { device = 3, start = 0, end = 2048 }]

[[host]]
id = 1
node = 3
weight = 2
shares = [{ device = 0, start = 2048, end = 4096 }]
"#;

#[test]
fn a_line_of_four_nodes_is_read_and_routed() {
    let description = ClusterDescription::from_toml(LINE).unwrap();
    assert_eq!(description.neighbours(1), [0, 2]);
    assert_eq!(description.hops(0, 3), Some(3));
    let config = description
        .router_config(1, 64, 8, RequestCosts::REFLEX)
        .unwrap();
    assert_eq!(config.links, 2);
    assert_eq!(
        config.next_hop,
        BTreeMap::from([(0, 0), (2, 1), (3, 1)]),
        "left is link 0, right is link 1"
    );
    assert!(!config.has_host);
    assert_eq!(config.host_weights, [1, 2]);
    let shares = description.shares_of(0).unwrap();
    assert_eq!(shares.owner(10), Some(0));
    assert_eq!(shares.owner(3000), Some(1));
    assert!(description
        .router_config(9, 64, 8, RequestCosts::REFLEX)
        .is_none());
}

fn refused(edit: impl Fn(&mut String)) -> String {
    let mut text = LINE.to_string();
    edit(&mut text);
    ClusterDescription::from_toml(&text)
        .unwrap_err()
        .to_string()
}

fn replaced<'a>(from: &'a str, to: &'a str) -> impl Fn(&mut String) + 'a {
    move |text: &mut String| {
        assert!(text.contains(from), "{from}");
        *text = text.replacen(from, to, 1);
    }
}

#[test]
fn every_check_refuses_with_a_clear_message() {
    let cases: [((&str, &str), &str); 15] = [
        (("version = 1", "version = 2"), "version 2 is not supported"),
        (
            ("id = 1\naddress", "id = 0\naddress"),
            "node id 0 is used twice",
        ),
        (
            ("id = 1\nnode = 3", "id = 0\nnode = 3"),
            "host id 0 is used twice",
        ),
        (
            ("links = [1]", "links = [7]"),
            "links to node 7, which the description does not name",
        ),
        (("links = [1]", "links = [0]"), "links to itself"),
        (("links = [1, 3]", "links = [1]"), "cannot be reached"),
        (
            ("preset = \"minflash\"", "preset = \"slc9\""),
            "device preset slc9: cannot read ./slc9",
        ),
        (
            ("end = 2048 }, { device = 3", "end = 2049 }, { device = 3"),
            "overlap at block 2048",
        ),
        (
            ("end = 4096", "end = 4097"),
            "goes past its 4096 blocks per chip",
        ),
        (
            ("node = 3\nweight", "node = 0\nweight"),
            "both attached to node 0",
        ),
        (("{ device = 3", "{ device = 8"), "share of device 8"),
        (
            ("id = 1\nnode = 3", "id = 4\nnode = 3"),
            "host 1 is missing",
        ),
        (("weight = 2", "colour = 2"), "unknown field"),
        (
            ("127.0.0.1:7401", "127.0.0.1"),
            "address 127.0.0.1 is not host:port",
        ),
        (
            ("127.0.0.1:7402", ":7402"),
            "address :7402 is not host:port",
        ),
    ];
    for ((from, to), expected) in cases {
        let message = refused(replaced(from, to));
        assert!(message.contains(expected), "{message} lacks {expected}");
    }
    assert!(ClusterDescription::from_toml("version = 1")
        .unwrap_err()
        .to_string()
        .contains("names no node"));
}

#[test]
fn the_link_kind_defaults_to_tcp_and_shm_needs_loopback_nodes() {
    let tcp = ClusterDescription::from_toml(LINE).unwrap();
    assert_eq!(tcp.link, LinkKind::Tcp);
    assert_eq!(tcp.socket_dir(), DEFAULT_SOCKET_DIR);
    let shm_text = format!("link = \"shm\"\nsocket_dir = \"sockets\"\n{LINE}");
    let shm = ClusterDescription::from_toml(&shm_text).unwrap();
    assert_eq!((shm.link, shm.socket_dir()), (LinkKind::Shm, "sockets"));
    let named = shm_text.replacen("127.0.0.1:7401", "localhost:7401", 1);
    let v6 = named.replacen("127.0.0.1:7402", "[::1]:7402", 1);
    assert!(ClusterDescription::from_toml(&v6).is_ok());
    let remote = shm_text.replacen("127.0.0.1:7402", "10.0.0.2:7402", 1);
    let message = ClusterDescription::from_toml(&remote)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("node 2's address 10.0.0.2:7402 is not a loopback"),
        "{message}"
    );
    let tcp_remote = LINE.replacen("127.0.0.1:7402", "10.0.0.2:7402", 1);
    assert!(ClusterDescription::from_toml(&tcp_remote).is_ok());
}

#[test]
fn a_bad_link_kind_or_socket_dir_is_refused() {
    let message = ClusterDescription::from_toml(&format!("link = \"udp\"\n{LINE}"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("tcp") && message.contains("shm"),
        "{message}"
    );
    for dir in [String::new(), "d".repeat(MAX_SOCKET_DIR_BYTES + 1)] {
        let text = format!("link = \"shm\"\nsocket_dir = \"{dir}\"\n{LINE}");
        let message = ClusterDescription::from_toml(&text)
            .unwrap_err()
            .to_string();
        assert!(message.contains("name a shorter folder"), "{message}");
    }
}

#[test]
fn unreadable_files_are_refused() {
    let missing = Path::new("/nonexistent/cluster.toml");
    assert!(matches!(
        ClusterDescription::from_file(missing),
        Err(DescriptionError::Unreadable { .. })
    ));
    assert!(matches!(
        ClusterDescription::from_file(Path::new("/")),
        Err(DescriptionError::Unreadable { .. })
    ));
}

#[test]
fn a_preset_file_is_read_from_the_description_folder() {
    let folder = tempfile::tempdir().unwrap();
    let mut narrow = FlashConfig::preset("minflash").unwrap();
    narrow.geometry.channels = 2;
    let narrow = narrow.to_toml();
    std::fs::create_dir(folder.path().join("presets")).unwrap();
    std::fs::write(folder.path().join("presets/narrow.toml"), narrow).unwrap();
    let text = LINE.replacen(
        "preset = \"minflash\"",
        "preset = \"presets/narrow.toml\"",
        1,
    );
    let path = folder.path().join("cluster.toml");
    std::fs::write(&path, &text).unwrap();
    let description = ClusterDescription::from_file(&path).unwrap();
    let node = description.node(0).unwrap();
    let config = description.preset_config(node).unwrap();
    assert_eq!(config.geometry.channels, 2);
    let shipped = description.preset_config(description.node(1).unwrap());
    assert_eq!(shipped.unwrap().geometry.channels, 8);

    std::fs::write(folder.path().join("presets/narrow.toml"), "channels = ").unwrap();
    let refused = ClusterDescription::from_file(&path)
        .unwrap_err()
        .to_string();
    assert!(
        refused.starts_with("node 0: device preset presets/narrow.toml: "),
        "{refused}"
    );
}
