//! `flashpipe cluster`: the minFlash cluster (docs/cluster.md). `check` validates a
//! description file and prints its nodes, hosts and links; `node` runs one flash node until
//! SIGINT or SIGTERM; `page` is a one-shot host sending one read, write or erase and
//! printing the ack's status (a non-zero exit, with the status named, on any status but Ok).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};
use flashpipe_base::wait::WaitPolicy;
use flashpipe_cluster::description::LinkKind;
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_host::handshake::HandshakeError;
use flashpipe_cluster_host::loaded::LoadError;
use flashpipe_cluster_node::auth::{KeyError, ProofError};
use flashpipe_cluster_node::host::{one_request, HostError};
use flashpipe_cluster_node::node::{load_description, start, NodeError, NodeOptions};
use flashpipe_cluster_node::words::{status_name, status_words};
use flashpipe_flash::{AckStatus, FlashAddress, FlashCommand, FlashConfig};
use flashpipe_net::{signals, LogFormat};

use crate::error_kind::{ErrorKind, Failure};
use crate::store_cmd::CliResult;

/// `flashpipe cluster`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Check a cluster description file; print its nodes, hosts and links.
    Check(CheckArgs),
    /// Run one flash node of a cluster until SIGINT or SIGTERM.
    Node(NodeArgs),
    /// Send one page request as a host of a cluster; print the ack's status.
    Page(PageArgs),
}

/// `flashpipe cluster check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The cluster description file (TOML, docs/cluster.md).
    pub file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `flashpipe cluster node`.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// The cluster description file.
    #[arg(long)]
    pub cluster: PathBuf,
    /// The node to run (its id in the description).
    #[arg(long)]
    pub node: u32,
    /// The folder of the node's device image (made if missing; default: the description
    /// file's folder). A node restarted with the same folder serves the same image.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Microseconds the router polls its inputs (spin, then yield) before it sleeps, 0 to
    /// 10000 [default: FLASHPIPE_SPIN_US, else 100 over shared-memory links and 0 over
    /// TCP]. Polling pays only where cores are spare: docs/benchmarks.md.
    #[arg(long)]
    pub spin_us: Option<WaitPolicy>,
    /// Print the readiness and stop lines as JSON, and log as JSON.
    #[arg(long)]
    pub json: bool,
    /// More log detail (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// What a page request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PageOp {
    /// ReadPage.
    Read,
    /// WritePage (the data from --input).
    Write,
    /// EraseBlock.
    Erase,
}

/// `flashpipe cluster page`.
#[derive(Debug, clap::Args)]
pub struct PageArgs {
    /// The cluster description file.
    #[arg(long)]
    pub cluster: PathBuf,
    /// The host to act as (its id in the description).
    #[arg(long)]
    pub host: u32,
    /// read, write or erase.
    pub op: PageOp,
    /// The device (node id).
    #[arg(long)]
    pub device: u32,
    /// The bus (channel) on the device.
    #[arg(long)]
    pub bus: u32,
    /// The chip (way) on the bus.
    #[arg(long)]
    pub chip: u32,
    /// The erase block within the chip.
    #[arg(long)]
    pub block: u32,
    /// The page within the block (ignored by erase).
    #[arg(long, default_value_t = 0)]
    pub page: u32,
    /// write: the page's data (at most one page; shorter data is padded with zeros).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// read: where to write the page's data.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `flashpipe cluster ...`.
pub fn run(command: ClusterCommand) -> CliResult {
    match command {
        ClusterCommand::Check(arguments) => check(&arguments),
        ClusterCommand::Node(arguments) => node(&arguments),
        ClusterCommand::Page(arguments) => page(&arguments),
    }
}

/// A description that cannot be used: a key file open to others is a permission matter,
/// anything else invalid input.
fn description_failure(error: NodeError) -> Box<dyn std::error::Error> {
    let kind = match error {
        NodeError::Load(LoadError::Key(KeyError::Open { .. })) => ErrorKind::Permission,
        _ => ErrorKind::InvalidInput,
    };
    Box::new(Failure::new(kind, error.to_string()))
}

fn invalid(error: impl std::fmt::Display) -> Box<dyn std::error::Error> {
    Box::new(Failure::invalid_input(error.to_string()))
}

fn check(arguments: &CheckArgs) -> CliResult {
    let loaded = load_description(&arguments.file).map_err(description_failure)?;
    let description = &loaded.description;
    let mut links = Vec::new();
    for node in &description.nodes {
        for neighbour in description.neighbours(node.id) {
            if neighbour > node.id {
                links.push((node.id, neighbour));
            }
        }
    }
    if arguments.json {
        let nodes: Vec<serde_json::Value> = description
            .nodes
            .iter()
            .map(|node| {
                serde_json::json!({
                    "id": node.id,
                    "address": node.address,
                    "preset": node.preset,
                    "image": node.image,
                    "links": description.neighbours(node.id),
                    "host": description.host_on(node.id).map(|host| host.id),
                })
            })
            .collect();
        let hosts: Vec<serde_json::Value> = description
            .hosts
            .iter()
            .map(|host| {
                let shares: Vec<serde_json::Value> = host
                    .shares
                    .iter()
                    .map(|share| {
                        serde_json::json!({"device": share.device, "start": share.start, "end": share.end})
                    })
                    .collect();
                serde_json::json!({"id": host.id, "node": host.node, "weight": host.weight, "shares": shares})
            })
            .collect();
        let object = serde_json::json!({
            "file": arguments.file.display().to_string(),
            "description_crc32c": loaded.crc,
            "nodes": nodes,
            "hosts": hosts,
            "links": links.iter().map(|&(a, b)| [a, b]).collect::<Vec<_>>(),
            "key_file": description.key_file,
            "link": description.link.name(),
            "socket_dir": loaded.socket_dir.display().to_string(),
        });
        println!("{}", serde_json::to_string_pretty(&object)?);
        return Ok(());
    }
    println!(
        "cluster {}: {} nodes, {} hosts, {} links (description checksum {:08x})",
        arguments.file.display(),
        description.nodes.len(),
        description.hosts.len(),
        links.len(),
        loaded.crc
    );
    match description.link {
        LinkKind::Tcp => println!("link: tcp"),
        LinkKind::Shm => println!("link: shm (sockets in {})", loaded.socket_dir.display()),
    }
    match &description.key_file {
        Some(file) => println!("key {file}: connections prove they hold it"),
        None => {
            println!("no key_file: connections are not authenticated (docs/cluster.md, \"Key\")")
        }
    }
    for node in &description.nodes {
        let neighbours: Vec<String> = description
            .neighbours(node.id)
            .iter()
            .map(u32::to_string)
            .collect();
        let host = description
            .host_on(node.id)
            .map_or_else(|| "no host".to_string(), |host| format!("host {}", host.id));
        println!(
            "node {}  {}  preset {}  image {}  links to {}  {host}",
            node.id,
            node.address,
            node.preset,
            node.image,
            listed_or(&neighbours, "none")
        );
    }
    for host in &description.hosts {
        let shares: Vec<String> = host
            .shares
            .iter()
            .map(|share| {
                format!(
                    "device {} blocks {}-{}",
                    share.device,
                    share.start,
                    share.end - 1
                )
            })
            .collect();
        println!(
            "host {}  on node {}  weight {}  shares: {}",
            host.id,
            host.node,
            host.weight,
            listed_or(&shares, "none (reads only)")
        );
    }
    for (a, b) in links {
        println!("link {a} - {b}");
    }
    Ok(())
}

fn node(arguments: &NodeArgs) -> CliResult {
    let log_format = if arguments.json {
        LogFormat::Json
    } else {
        LogFormat::Text
    };
    let stop_signals = crate::serve_cmd::start_server_process(log_format, arguments.verbose)?;
    let image_folder = arguments.image.clone().unwrap_or_else(|| {
        arguments
            .cluster
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    });
    let running = start(&NodeOptions {
        description: arguments.cluster.clone(),
        node: arguments.node,
        image_folder,
        spin: crate::serve_cmd::spin_setting(arguments.spin_us)?,
    })
    .map_err(invalid)?;
    let ready = running.ready().clone();
    if arguments.json {
        let object = serde_json::json!({
            "event": "ready",
            "command": "cluster node",
            "node": ready.node,
            "address": ready.address.to_string(),
            "socket": ready.socket.as_ref().map(|socket| socket.display().to_string()),
            "preset": ready.preset,
            "image": ready.image.display().to_string(),
            "image_reopened": ready.image_reopened,
            "links": ready.neighbours,
            "host": ready.host,
        });
        println!("{object}");
    } else {
        let host = ready
            .host
            .map_or_else(|| "no host".to_string(), |host| format!("host {host}"));
        let neighbours = if ready.neighbours.is_empty() {
            "none".to_string()
        } else {
            let ids: Vec<String> = ready.neighbours.iter().map(u32::to_string).collect();
            ids.join(", ")
        };
        let listening = ready.socket.as_ref().map_or_else(
            || ready.address.to_string(),
            |socket| format!("{} (shared memory)", socket.display()),
        );
        println!(
            "cluster node {}: ready on {listening}, device {} image {} ({}), links to nodes {}, {host} (SIGINT or SIGTERM stops)",
            ready.node,
            ready.preset,
            ready.image.display(),
            if ready.image_reopened { "reopened" } else { "created" },
            neighbours
        );
    }
    let stopper = running.stopper();
    let signal_thread = stop_signals.serve(move |signal| {
        tracing::info!(
            signal = signals::signal_name(signal),
            "stopping: closing links, syncing the image"
        );
        stopper.stop();
    });
    let summary = running
        .wait()
        .map_err(|error| Failure::new(ErrorKind::Io, error.to_string()))?;
    if arguments.json {
        let object = serde_json::json!({
            "event": "stopped",
            "renamed": summary.renamed,
            "device_requests": summary.device_requests,
            "unreachable": summary.unreachable,
            "not_owner": summary.not_owner,
            "busy": summary.busy,
            "bad_peers": summary.bad_peers,
        });
        stop_line(&object.to_string());
    } else {
        stop_line(&format!(
            "cluster node {}: stopped ({} requests routed, {} on its device, {} unreachable, {} not owner, {} busy, {} connections closed for bad frames)",
            ready.node,
            summary.renamed,
            summary.device_requests,
            summary.unreachable,
            summary.not_owner,
            summary.busy,
            summary.bad_peers
        ));
    }
    signal_thread.close();
    Ok(())
}

/// The stop line on standard output; a reader gone by then (SIGPIPE is ignored in a node)
/// loses it, and the node still exits cleanly.
fn stop_line(line: &str) {
    let mut standard_output = std::io::stdout().lock();
    let _ = writeln!(standard_output, "{line}");
    let _ = standard_output.flush();
}

fn page(arguments: &PageArgs) -> CliResult {
    let address = FlashAddress {
        device: arguments.device,
        bus: arguments.bus,
        chip: arguments.chip,
        block: arguments.block,
        page: arguments.page,
    };
    if arguments.op != PageOp::Write && arguments.input.is_some() {
        return Err(invalid("--input is for write only"));
    }
    if arguments.op != PageOp::Read && arguments.output.is_some() {
        return Err(invalid("--output is for read only"));
    }
    let loaded = load_description(&arguments.cluster).map_err(description_failure)?;
    let Some(device) = loaded.description.node(arguments.device) else {
        let known: Vec<String> = loaded
            .description
            .nodes
            .iter()
            .map(|node| node.id.to_string())
            .collect();
        return Err(invalid(format!(
            "device {} is not in the cluster description (its devices: {})",
            arguments.device,
            known.join(", ")
        )));
    };
    let command = match arguments.op {
        PageOp::Read => FlashCommand::ReadPage { address },
        PageOp::Erase => FlashCommand::EraseBlock { address },
        PageOp::Write => {
            let Some(input) = &arguments.input else {
                return Err(invalid("write needs --input FILE (the page's data)"));
            };
            let config = FlashConfig::preset(&device.preset).map_err(invalid)?;
            let page_bytes = config.geometry.page_data_bytes as usize;
            let mut data = std::fs::read(input).map_err(|error| {
                Failure::new(
                    ErrorKind::NotFound,
                    format!("cannot read --input {}: {error}", input.display()),
                )
            })?;
            if data.len() > page_bytes {
                return Err(invalid(format!(
                    "--input {} holds {} bytes; device {}'s pages hold {page_bytes}",
                    input.display(),
                    data.len(),
                    arguments.device
                )));
            }
            data.resize(page_bytes, 0);
            FlashCommand::WritePage {
                address,
                data,
                spare: Vec::new(),
            }
        }
    };
    let reply = one_request(&arguments.cluster, arguments.host, command).map_err(|error| {
        let kind = match error {
            HostError::Handshake(HandshakeError::Proof {
                error: ProofError::WrongKey,
                ..
            })
            | HostError::Handshake(HandshakeError::Load(LoadError::Key(KeyError::Open {
                ..
            }))) => ErrorKind::Permission,
            _ => ErrorKind::Network,
        };
        Failure::new(kind, error.to_string())
    })?;
    let status = &reply.ack.status;
    let words = status_words(status);
    let what = format!(
        "{} device {} bus {} chip {} block {}{}",
        match arguments.op {
            PageOp::Read => "read",
            PageOp::Write => "write",
            PageOp::Erase => "erase",
        },
        arguments.device,
        arguments.bus,
        arguments.chip,
        arguments.block,
        if arguments.op == PageOp::Erase {
            String::new()
        } else {
            format!(" page {}", arguments.page)
        }
    );
    let data = reply.ack.payload.as_ref().map(|payload| &payload.data);
    if let (Some(output), Some(data)) = (&arguments.output, data) {
        if matches!(
            status,
            Status::Flash(AckStatus::Ok { .. } | AckStatus::Uncorrectable)
        ) {
            std::fs::write(output, data).map_err(|error| {
                Failure::new(
                    ErrorKind::Io,
                    format!("cannot write --output {}: {error}", output.display()),
                )
            })?;
        }
    }
    let ok = matches!(status, Status::Flash(AckStatus::Ok { .. }));
    if arguments.json {
        let object = serde_json::json!({
            "op": what,
            "host": arguments.host,
            "status": status_name(status),
            "detail": words,
            "hops": reply.hops,
            "bytes": data.map_or(0, Vec::len),
        });
        println!("{object}");
    } else if ok {
        let bytes = data.map_or_else(String::new, |data| format!(", {} bytes", data.len()));
        println!("{what}: {words}, {} hops{bytes}", reply.hops);
    }
    if !ok {
        let kind = match status {
            Status::Unreachable { .. } | Status::Busy { .. } => ErrorKind::Network,
            Status::Flash(AckStatus::Uncorrectable | AckStatus::BadBlock) => ErrorKind::Io,
            _ => ErrorKind::InvalidInput,
        };
        return Err(Box::new(Failure::new(kind, format!("{what}: {words}"))));
    }
    Ok(())
}

/// `items` joined with commas, or `none` when there are none.
fn listed_or(items: &[String], none: &str) -> String {
    if items.is_empty() {
        none.to_string()
    } else {
        items.join(", ")
    }
}
