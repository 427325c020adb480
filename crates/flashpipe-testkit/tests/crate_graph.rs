//! The crate graph keeps ARCHITECTURE.md's layer rule: dependencies point down.
//!
//! Reads `cargo metadata --no-deps --format-version 1` (no network, no build) and checks every
//! dependency between the workspace's crates against three lists kept here:
//!
//! - [`LAYERS`]: every crate, layer by layer from the bottom, today's crates and the ones the
//!   redesign adds. A normal or build dependency must name a crate placed before the one that
//!   names it (a lower layer, or earlier in the same layer). A crate missing from the list
//!   fails the test: place it when it is added.
//! - [`FORBIDDEN`]: edges that must not exist even where the order allows them (the file system
//!   under the protocol, the NBD server under the store, the engine's and the kernels' narrow
//!   dependencies), as whole rules where a crate may name only a few others.
//! - [`EXPECTED_TO_GO`]: forbidden edges that exist today and are being removed. The test passes
//!   with them and fails once one is gone, so that whoever merges the change that removes an
//!   edge deletes its line here and the edge cannot come back.
//!
//! A dev-dependency may point anywhere but up: it must not name a crate that itself depends
//! (normally, directly or not) on the crate whose tests use it, which would build two copies of
//! that crate. The exception is `flashpipe-testkit`, the shared test support every crate's tests
//! may use; it is only ever a dev-dependency. Nothing names `flashpipe-cli`, and only the CLI
//! and the simulated campaign name the benchmark crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use flashpipe_testkit::tools::stdout_of;
use serde_json::Value;

/// Every crate, bottom layer first; a crate depends only on crates listed before it.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaf",
        &[
            "flashpipe-units",
            "flashpipe-base",
            "flashpipe-api",
            "flashpipe-nbd-wire",
        ],
    ),
    ("simulation", &["flashpipe-sim"]),
    ("shared memory", &["flashpipe-shm"]),
    (
        "devices",
        &[
            "flashpipe-device",
            "flashpipe-flash",
            "flashpipe-ftl",
            "flashpipe-array",
            "flashpipe-cluster",
            "flashpipe-cluster-host",
        ],
    ),
    ("network", &["flashpipe-net", "flashpipe-cluster-node"]),
    // The client below the server: the server crate (`flashpipe-nbd`) holds the simulated
    // client, which runs the client's core against the server's.
    ("nbd", &["flashpipe-nbd-client", "flashpipe-nbd"]),
    ("file system", &["flashpipe-fs", "flashpipe-engine"]),
    ("kernels", &["flashpipe-kernels"]),
    ("store", &["flashpipe-store"]),
    ("pipeline", &["flashpipe-pipeline"]),
    (
        "service",
        &["flashpipe-protocol", "flashpipe-client", "flashpipe-server"],
    ),
    (
        "measurement",
        &["flashpipe-bench-harness", "flashpipe-bench"],
    ),
    ("check", &["flashpipe-vopr"]),
    ("test support", &["flashpipe-testkit"]),
    (
        "interfaces",
        &["flashpipe-mount", "flashpipe-cli", "flashpipe-python"],
    ),
];

/// A rule no normal or build dependency may break.
enum Rule {
    /// `from` must not depend on `to`.
    Edge {
        from: &'static str,
        to: &'static str,
    },
    /// `from` may depend on these workspace crates and no other.
    Only {
        from: &'static str,
        allowed: &'static [&'static str],
    },
}

/// Edges that must not exist, whatever the layer order allows.
const FORBIDDEN: &[Rule] = &[
    // The wire and the client carry values, never the file system that makes them.
    Rule::Edge {
        from: "flashpipe-protocol",
        to: "flashpipe-fs",
    },
    Rule::Edge {
        from: "flashpipe-client",
        to: "flashpipe-fs",
    },
    Rule::Edge {
        from: "flashpipe-client",
        to: "flashpipe-engine",
    },
    Rule::Edge {
        from: "flashpipe-client",
        to: "flashpipe-server",
    },
    // The store opens remote devices with the NBD client; it never links the NBD server.
    Rule::Edge {
        from: "flashpipe-store",
        to: "flashpipe-nbd",
    },
    // The store opens cluster devices through the host's device-layer crate; it never
    // links the node process (network layer).
    Rule::Edge {
        from: "flashpipe-store",
        to: "flashpipe-cluster-node",
    },
    // The NBD client never links the server; the wire format names neither.
    Rule::Edge {
        from: "flashpipe-nbd-client",
        to: "flashpipe-nbd",
    },
    Rule::Only {
        from: "flashpipe-nbd-wire",
        allowed: &["flashpipe-base"],
    },
    // The product links no benchmark experiment.
    Rule::Edge {
        from: "flashpipe-server",
        to: "flashpipe-bench",
    },
    // The engine: nothing below it but the file system, the devices, the shared leaves and
    // the shared memory its read pool may live in.
    Rule::Only {
        from: "flashpipe-engine",
        allowed: &[
            "flashpipe-fs",
            "flashpipe-device",
            "flashpipe-base",
            "flashpipe-api",
            "flashpipe-shm",
        ],
    },
    // Kernels are functions over byte slices: the size grammar and the shared leaf at most.
    Rule::Only {
        from: "flashpipe-kernels",
        allowed: &["flashpipe-units", "flashpipe-base"],
    },
    Rule::Only {
        from: "flashpipe-units",
        allowed: &[],
    },
    Rule::Only {
        from: "flashpipe-base",
        allowed: &[],
    },
    Rule::Only {
        from: "flashpipe-api",
        allowed: &["flashpipe-base"],
    },
    Rule::Only {
        from: "flashpipe-protocol",
        allowed: &["flashpipe-api", "flashpipe-base", "flashpipe-units"],
    },
];

/// Forbidden edges (`from`, `to`, kind) that exist today and are on their way out. Delete a
/// line when the change that removes its edge merges.
const EXPECTED_TO_GO: &[(&str, &str, Kind)] = &[];

/// How a crate names another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Normal,
    Build,
    Development,
}

/// One dependency between two workspace crates.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    kind: Kind,
}

impl std::fmt::Display for Edge {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Normal => "",
            Kind::Build => " (build)",
            Kind::Development => " (dev)",
        };
        write!(formatter, "{} -> {}{kind}", self.from, self.to)
    }
}

/// The workspace's crates and the dependencies between them, from `cargo metadata`.
fn workspace_graph() -> (BTreeSet<String>, Vec<Edge>) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let stdout = stdout_of(
        Command::new(cargo)
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .arg("--manifest-path")
            .arg(&manifest),
        "cargo metadata",
    );
    let metadata: Value = serde_json::from_slice(&stdout).expect("cargo metadata is JSON");
    let packages = metadata["packages"].as_array().expect("a package list");
    let crates: BTreeSet<String> = packages
        .iter()
        .map(|package| package["name"].as_str().expect("a name").to_string())
        .collect();
    let mut edges = Vec::new();
    for package in packages {
        let from = package["name"].as_str().expect("a name");
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let to = dependency["name"].as_str().expect("a dependency name");
            if !crates.contains(to) {
                continue;
            }
            let kind = match dependency["kind"].as_str() {
                None => Kind::Normal,
                Some("build") => Kind::Build,
                Some("dev") => Kind::Development,
                Some(other) => panic!("unknown dependency kind {other} in {from}"),
            };
            edges.push(Edge {
                from: from.to_string(),
                to: to.to_string(),
                kind,
            });
        }
    }
    edges.sort();
    edges.dedup();
    (crates, edges)
}

/// Each crate's place in [`LAYERS`] (bottom first), checking that no crate is placed twice.
fn ranks() -> BTreeMap<&'static str, usize> {
    let mut ranks = BTreeMap::new();
    for name in LAYERS.iter().flat_map(|(_, crates)| crates.iter()) {
        let rank = ranks.len();
        assert!(
            ranks.insert(*name, rank).is_none(),
            "{name} is placed twice"
        );
    }
    ranks
}

fn layer_of(name: &str) -> &'static str {
    LAYERS
        .iter()
        .find(|(_, crates)| crates.contains(&name))
        .map_or("no layer", |(layer, _)| layer)
}

fn is_expected_to_go(edge: &Edge) -> bool {
    EXPECTED_TO_GO
        .iter()
        .any(|(from, to, kind)| edge.from == *from && edge.to == *to && edge.kind == *kind)
}

fn breaks_a_rule(edge: &Edge) -> bool {
    FORBIDDEN.iter().any(|rule| match rule {
        Rule::Edge { from, to } => edge.from == *from && edge.to == *to,
        Rule::Only { from, allowed } => edge.from == *from && !allowed.contains(&edge.to.as_str()),
    })
}

/// The crates `name` depends on through normal and build dependencies, directly or not.
fn built_on(name: &str, edges: &[Edge]) -> BTreeSet<String> {
    let mut reached = BTreeSet::new();
    let mut frontier = vec![name.to_string()];
    while let Some(current) = frontier.pop() {
        for edge in edges
            .iter()
            .filter(|edge| edge.from == current && edge.kind != Kind::Development)
        {
            if reached.insert(edge.to.clone()) {
                frontier.push(edge.to.clone());
            }
        }
    }
    reached
}

/// Why `edge` breaks the layer rule, or `None` when it keeps it.
fn violation(edge: &Edge, ranks: &BTreeMap<&str, usize>, edges: &[Edge]) -> Option<String> {
    if edge.to == "flashpipe-cli" {
        return Some("nothing depends on the CLI".to_string());
    }
    if edge.to == "flashpipe-bench"
        && !["flashpipe-cli", "flashpipe-vopr"].contains(&edge.from.as_str())
    {
        return Some("only the CLI uses the benchmarks".to_string());
    }
    match edge.kind {
        Kind::Development => {
            if edge.to != "flashpipe-testkit" && built_on(&edge.to, edges).contains(&edge.from) {
                return Some(format!(
                    "{} is built on {}: a test dependency must not point up",
                    edge.to, edge.from
                ));
            }
        }
        Kind::Normal | Kind::Build => {
            if edge.to == "flashpipe-testkit" {
                return Some("the test kit is only ever a dev-dependency".to_string());
            }
            if ranks[edge.to.as_str()] >= ranks[edge.from.as_str()] {
                return Some(format!(
                    "{} ({}) is not below {} ({})",
                    edge.to,
                    layer_of(&edge.to),
                    edge.from,
                    layer_of(&edge.from)
                ));
            }
            if breaks_a_rule(edge) {
                return Some("a forbidden edge".to_string());
            }
        }
    }
    None
}

#[test]
fn every_crate_has_a_layer() {
    let ranks = ranks();
    let (crates, _) = workspace_graph();
    let unplaced: Vec<&String> = crates
        .iter()
        .filter(|name| !ranks.contains_key(name.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "crates without a layer (add them to LAYERS in {}): {unplaced:?}",
        file!()
    );
}

#[test]
fn dependencies_point_down() {
    let ranks = ranks();
    let (crates, edges) = workspace_graph();
    assert!(
        crates.iter().all(|name| ranks.contains_key(name.as_str())),
        "every_crate_has_a_layer names the crates to place"
    );
    let broken: Vec<String> = edges
        .iter()
        .filter(|edge| !is_expected_to_go(edge))
        .filter_map(|edge| violation(edge, &ranks, &edges).map(|why| format!("{edge}: {why}")))
        .collect();
    assert!(
        broken.is_empty(),
        "dependencies that break ARCHITECTURE.md's layer rule:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn the_edges_expected_to_go_are_still_there_and_still_wrong() {
    let ranks = ranks();
    let (_, edges) = workspace_graph();
    for (from, to, kind) in EXPECTED_TO_GO {
        let edge = Edge {
            from: from.to_string(),
            to: to.to_string(),
            kind: *kind,
        };
        assert!(
            edges.contains(&edge),
            "{edge} is gone: delete its line from EXPECTED_TO_GO in {}, so it cannot come back",
            file!()
        );
        assert!(
            violation(&edge, &ranks, &edges).is_some(),
            "{edge} keeps the layer rule: it does not belong in EXPECTED_TO_GO"
        );
    }
}

#[test]
fn the_rules_catch_an_upward_edge_and_a_forbidden_one() {
    let ranks = ranks();
    let edge = |from: &str, to: &str, kind| Edge {
        from: from.to_string(),
        to: to.to_string(),
        kind,
    };
    let graph = [
        edge("flashpipe-store", "flashpipe-fs", Kind::Normal),
        edge("flashpipe-fs", "flashpipe-device", Kind::Normal),
    ];
    // (from, to, kind, whether the edge breaks the rule)
    let cases = [
        ("flashpipe-store", "flashpipe-fs", Kind::Normal, false),
        ("flashpipe-device", "flashpipe-fs", Kind::Normal, true),
        ("flashpipe-engine", "flashpipe-store", Kind::Normal, true),
        ("flashpipe-kernels", "flashpipe-device", Kind::Normal, true),
        (
            "flashpipe-device",
            "flashpipe-store",
            Kind::Development,
            true,
        ),
        (
            "flashpipe-device",
            "flashpipe-array",
            Kind::Development,
            false,
        ),
        ("flashpipe-store", "flashpipe-testkit", Kind::Normal, true),
        (
            "flashpipe-store",
            "flashpipe-nbd-client",
            Kind::Normal,
            false,
        ),
        ("flashpipe-store", "flashpipe-nbd", Kind::Normal, true),
        ("flashpipe-nbd-client", "flashpipe-nbd", Kind::Normal, true),
        ("flashpipe-nbd-wire", "flashpipe-device", Kind::Normal, true),
        (
            "flashpipe-fs",
            "flashpipe-testkit",
            Kind::Development,
            false,
        ),
    ];
    for (from, to, kind, breaks) in cases {
        let case = edge(from, to, kind);
        assert_eq!(violation(&case, &ranks, &graph).is_some(), breaks, "{case}");
    }
}
