//! The cluster campaign: the minFlash cluster inside one seeded simulated world, under
//! seeded faults.
//!
//! One seed builds one [`World`] holding a linear array of 2 to 4 flash nodes, each the
//! `flashpipe-cluster` [`Router`](flashpipe_cluster::router::Router) core driven as the
//! node process drives it (`node`) over one `FlashArray` in virtual time (`device`),
//! links between neighbours (0.5 us per hop, the preset's link bandwidth), and 1 to 4
//! hosts, each attached to its own node and owning a share of every device's blocks
//! (`hosts`). The routers' configurations come from a cluster description made for the
//! seed, through the same `ClusterDescription::router_config` the node process uses.
//!
//! A run has three phases:
//! 1. the mixed workload under a [`FaultPlan`]: link drops (a frame lost severs its
//!    link), partitions, node crashes and restarts, outages, slow nodes, host restarts;
//!    every ack is judged as it arrives (`hosts`);
//! 2. once the world is idle: every request answered, no controller tag in use, no frame
//!    queued, every link's tokens back (`SimNode::unrest`); then every published page
//!    is read back and checked, and the world checked at rest again;
//! 3. with 2 or more hosts and no faults left: every host reads one device with the same
//!    queue depth, and Jain's index of the reads each completes in a window must be at
//!    least 0.99.
//!
//! A failing seed is reported as `seed S failed ...; FLASHPIPE_SEED=S replays`.

mod check;
mod device;
mod hosts;
mod node;
mod world;

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use flashpipe_cluster::arbiter::{jain_index, RequestCosts};
use flashpipe_cluster::description::{line_text, ClusterDescription};
use flashpipe_cluster::wire::WireLimits;
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};
use flashpipe_sim::{FaultPlan, FaultPlanConfig, World};

pub use device::CutCounts;
pub use hosts::HostCounts;
pub use node::NodeLimits;
pub use world::NetCounts;

use device::Device;
use hosts::{Mode, Shape, SimHost};
use node::SimNode;
use world::Net;

/// The device preset every node runs.
pub const PRESET: &str = "minflash-rack";
/// The least Jain's index of the fairness phase.
pub const JAIN_MIN: f64 = 0.99;
/// The fairness phase's window of virtual time (after 2 ms to warm up).
const FAIRNESS_WINDOW_NS: u64 = 20_000_000;
/// The most requests a host keeps in flight in the deepest seeds: past a router's tags
/// and its queue per host, so requests wait for tags and some are answered Busy.
const HOST_DEPTH_DEEP: usize = 160;
/// Most host restarts per seed.
const HOST_RESTARTS_MAX: u64 = 2;
/// Steps of the fault plan.
const PLAN_STEPS: u64 = 100;
/// Virtual time of one plan step.
const STEP_NS: u64 = 150_000;
/// Steps a phase may take before the world is called stuck.
const PHASE_STEPS_MAX: u64 = 5_000_000;

/// A bug planted on purpose in the simulated nodes; the campaign must find each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterBug {
    /// A node taking a link down drops the failures its router answers for the requests
    /// that went out on that link: their sources never hear back.
    LinkDownUnanswered,
    /// A node answers a program Ok without passing it to its device.
    ProgramAckedUndone,
    /// A node loses one credit frame a neighbour sent: that link's tokens never all come back.
    CreditDropped,
}

/// What the campaign runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Requests each host issues in the mixed phase, at most (seeded from half of it).
    pub requests_per_host: u64,
    /// Whether the fault plan strikes.
    pub faults: bool,
    /// A bug planted on purpose, or none.
    pub planted_bug: Option<ClusterBug>,
    /// Every node's bounds.
    pub limits: NodeLimits,
    /// Whether the fairness phase runs (with 2 or more hosts).
    pub fairness: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            requests_per_host: 160,
            faults: true,
            planted_bug: None,
            limits: NodeLimits::NODE_PROCESS,
            fairness: true,
        }
    }
}

/// What one seed went through.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ClusterReport {
    /// The seed.
    pub seed: u64,
    /// A sum of the history (every ack a host received, its time and status).
    pub fingerprint: u64,
    /// Nodes in the linear array.
    pub nodes: u32,
    /// Hosts.
    pub hosts: u32,
    /// What the hosts saw, summed.
    pub host_counts: HostCounts,
    /// What the network did.
    pub net: NetCounts,
    /// What the power cuts did, summed over the nodes.
    pub cuts: CutCounts,
    /// Requests the devices carried out.
    pub device_requests: u64,
    /// Jain's index of the fairness phase (none with one host).
    pub jain: Option<f64>,
    /// Virtual time at the end, nanoseconds.
    pub virtual_time_ns: u64,
}

/// A seed that found something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ClusterFailure {
    /// The seed.
    pub seed: u64,
    /// The phase it happened in.
    pub phase: &'static str,
    /// Virtual time of the finding, nanoseconds.
    pub at_ns: u64,
    /// What went wrong.
    pub finding: String,
}

impl fmt::Display for ClusterFailure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "seed {} failed in the {} at {} us: {}; FLASHPIPE_SEED={} replays",
            self.seed,
            self.phase,
            self.at_ns / 1_000,
            self.finding,
            self.seed
        )
    }
}

/// The cluster campaign runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterCampaign {
    config: ClusterConfig,
}

/// The description of a seed's cluster: nodes `0..nodes` in a line, host `h` on node
/// `attachments[h]`, owning blocks `h * per_host .. (h + 1) * per_host` of every device.
fn description(
    nodes: u32,
    attachments: &[u32],
    per_host: u32,
) -> Result<ClusterDescription, String> {
    let ports: Vec<u16> = (0..nodes).map(|node| 7000 + node as u16).collect();
    let text = line_text(&ports, PRESET, "node", attachments, per_host);
    ClusterDescription::from_toml(&text)
        .map_err(|error| format!("the seed's cluster description was refused: {error}"))
}

impl ClusterCampaign {
    /// A runner with this configuration.
    pub fn new(config: ClusterConfig) -> ClusterCampaign {
        ClusterCampaign { config }
    }

    /// Runs one seed.
    pub fn run(&self, seed: u64) -> Result<ClusterReport, ClusterFailure> {
        let fail = |phase: &'static str, at_ns: u64, finding: String| ClusterFailure {
            seed,
            phase,
            at_ns,
            finding,
        };
        let node_limits = self.config.limits;
        for (name, value) in [
            ("tags", node_limits.tags as usize),
            ("queue_limit", node_limits.queue_limit as usize),
            ("link_window", node_limits.link_window as usize),
            ("credit_batch", node_limits.credit_batch as usize),
            ("stage_frames", node_limits.stage_frames),
        ] {
            if value == 0 {
                let finding = format!("node limit {name} is 0; give at least 1");
                return Err(fail("setup", 0, finding));
            }
        }
        let mut world = World::new(seed);
        let mut setup = world.stream();
        let nodes = 2 + setup.below(3) as u32;
        let host_count = 1 + setup.below(u64::from(nodes)) as u32;
        let mut order: Vec<u32> = (0..nodes).collect();
        for index in (1..order.len()).rev() {
            order.swap(index, setup.index_below(index + 1));
        }
        let attachments = &order[..host_count as usize];
        let per_host = 2 + setup.below(3) as u32;
        let description = description(nodes, attachments, per_host)
            .map_err(|finding| fail("setup", 0, finding))?;
        let mut config = FlashConfig::preset(PRESET)
            .map_err(|error| fail("setup", 0, format!("preset {PRESET}: {error}")))?;
        config.geometry.devices = 1;
        config.geometry.channels = 2;
        config.geometry.ways = 2;
        config.geometry.pages_per_block = 8;
        let limits = WireLimits::of_config(&config);
        let mut sim_nodes = Vec::new();
        for node in 0..nodes {
            let router_config = description
                .router_config(
                    node,
                    node_limits.tags,
                    node_limits.queue_limit,
                    RequestCosts::REFLEX,
                )
                .expect("every node of the description has a router configuration");
            let options = FlashOptions {
                seed: world.draw_seed(),
                storage: StorageMode::Memory,
                host_count,
                host_queue_depth: node_limits.tags,
            };
            let array = FlashArray::new(config.clone(), options)
                .map_err(|error| fail("setup", 0, format!("node {node}'s array: {error}")))?;
            let sim_node = SimNode::new(
                router_config,
                node_limits,
                Device::new(array),
                self.config.planted_bug,
                world.stream(),
            )
            .map_err(|finding| fail("setup", 0, finding))?;
            sim_nodes.push(sim_node);
        }
        let shape = Shape {
            nodes,
            hosts: host_count,
            buses: config.geometry.channels,
            chips: config.geometry.ways,
            pages: config.geometry.pages_per_block,
            data_bytes: config.geometry.page_data_bytes as usize,
            spare_bytes: config.host_spare_bytes() as usize,
            blocks_per_host: per_host,
        };
        let mut hosts = Vec::new();
        for (host, &node) in attachments.iter().enumerate() {
            let deepest = if setup.chance(0.3) {
                HOST_DEPTH_DEEP
            } else {
                16
            };
            let limit = 1 + setup.index_below(deepest);
            let mut sim_host = SimHost::new(host as u32, node, limit, world.stream());
            let budget = self.config.requests_per_host / 2
                + setup.below(self.config.requests_per_host / 2 + 1);
            sim_host.mode = Mode::Mixed { budget };
            hosts.push(sim_host);
        }
        let mut net = Net::new(
            sim_nodes,
            hosts,
            shape,
            limits,
            config.timing.link_bytes_per_second,
            config.timing.host_link_bytes_per_second,
            world.stream(),
        );
        if self.config.faults {
            let plan_config = FaultPlanConfig {
                horizon_steps: PLAN_STEPS,
                node_count: nodes as usize,
                crashes_max: 0,
                node_restarts_max: 2,
                partitions_max: 2,
                outages_max: 1,
                slow_devices_max: 1,
                failing_devices_max: 2,
            };
            let plan = FaultPlan::draw(&plan_config, &mut world.stream());
            for fault in plan.faults() {
                let duration_ns = match fault.kind {
                    flashpipe_sim::FaultKind::Outage { duration_steps, .. }
                    | flashpipe_sim::FaultKind::FailingDevice { duration_steps, .. } => {
                        duration_steps * STEP_NS
                    }
                    _ => 200_000 + setup.below(2_800_000),
                };
                net.plan_fault(fault.at_step * STEP_NS, fault.kind, duration_ns);
            }
            for _ in 0..setup.below(HOST_RESTARTS_MAX + 1) {
                let at_ns = setup.below(PLAN_STEPS) * STEP_NS;
                net.plan_host_restart(at_ns, setup.index_below(host_count as usize));
            }
        }
        let net = Rc::new(RefCell::new(net));
        world.register(Box::new(Rc::clone(&net)));

        let phase = "workload under faults";
        run_to_idle(&mut world, &net).map_err(|finding| fail(phase, world.now_ns(), finding))?;
        at_rest(&net.borrow()).map_err(|finding| fail(phase, world.now_ns(), finding))?;

        let phase = "read-back sweep";
        {
            let mut state = net.borrow_mut();
            let pages = state.published.all();
            let count = state.hosts.len();
            for (index, host) in state.hosts.iter_mut().enumerate() {
                let mine = pages.iter().copied().skip(index).step_by(count).collect();
                host.mode = Mode::Sweep { pages: mine };
            }
            state.kick();
        }
        run_to_idle(&mut world, &net).map_err(|finding| fail(phase, world.now_ns(), finding))?;
        at_rest(&net.borrow()).map_err(|finding| fail(phase, world.now_ns(), finding))?;

        let mut jain = None;
        if host_count >= 2 && self.config.fairness {
            let phase = "fairness phase";
            let device = setup.below(u64::from(nodes)) as u32;
            let depth = 8 + setup.index_below(33);
            let start_ns = world.now_ns() + 2_000_000;
            let end_ns = start_ns + FAIRNESS_WINDOW_NS;
            {
                let mut state = net.borrow_mut();
                state.heal();
                for host in &mut state.hosts {
                    host.set_limit(depth);
                    host.mode = Mode::Fairness {
                        device,
                        window_ns: (start_ns, end_ns),
                    };
                }
                state.kick();
            }
            world.run_until(end_ns);
            {
                let mut state = net.borrow_mut();
                for host in &mut state.hosts {
                    host.mode = Mode::Idle;
                }
            }
            run_to_idle(&mut world, &net)
                .map_err(|finding| fail(phase, world.now_ns(), finding))?;
            at_rest(&net.borrow()).map_err(|finding| fail(phase, world.now_ns(), finding))?;
            let state = net.borrow();
            let reads: Vec<u64> = state
                .hosts
                .iter()
                .map(|host| host.counts.window_reads)
                .collect();
            let shares: Vec<f64> = reads.iter().map(|&count| count as f64).collect();
            let index = jain_index(&shares);
            if index < JAIN_MIN {
                let finding = format!(
                    "hosts reading device {device} at depth {depth} completed {} reads each in the window: Jain's index {index:.4}, below {JAIN_MIN}",
                    reads.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                );
                return Err(fail(phase, world.now_ns(), finding));
            }
            jain = Some(index);
        }

        let state = net.borrow();
        let mut report = ClusterReport {
            seed,
            fingerprint: state.fingerprint,
            nodes,
            hosts: host_count,
            net: state.counts,
            jain,
            virtual_time_ns: world.now_ns(),
            ..ClusterReport::default()
        };
        for host in &state.hosts {
            let counts = &mut report.host_counts;
            counts.issued += host.counts.issued;
            counts.answered += host.counts.answered;
            counts.carried_out += host.counts.carried_out;
            counts.refused_as_due += host.counts.refused_as_due;
            counts.failed_by_faults += host.counts.failed_by_faults;
            counts.busy += host.counts.busy;
            counts.reads_checked += host.counts.reads_checked;
            counts.window_reads += host.counts.window_reads;
        }
        for node in &state.nodes {
            let cut = node.device.counts();
            report.cuts.programs_torn += cut.programs_torn;
            report.cuts.programs_lost += cut.programs_lost;
            report.cuts.erases_interrupted += cut.erases_interrupted;
            report.cuts.acks_dropped += cut.acks_dropped;
            report.device_requests += node.device_requests;
        }
        Ok(report)
    }
}

/// Steps the world until nothing is left to run, stopping at the first finding.
fn run_to_idle(world: &mut World, net: &Rc<RefCell<Net>>) -> Result<(), String> {
    for _ in 0..PHASE_STEPS_MAX {
        if let Some(finding) = net.borrow().finding.clone() {
            return Err(finding);
        }
        if !world.step() {
            return match net.borrow().finding.clone() {
                Some(finding) => Err(finding),
                None => Ok(()),
            };
        }
    }
    Err(format!(
        "the world did not go idle within {PHASE_STEPS_MAX} steps (a livelock)"
    ))
}

/// Checks the world at rest: every request answered, every node at rest.
fn at_rest(net: &Net) -> Result<(), String> {
    for host in &net.hosts {
        if host.outstanding() > 0 {
            let nodes: Vec<String> = net.nodes.iter().filter_map(SimNode::unrest).collect();
            return Err(format!(
                "host {} has {} requests that never got an ack:{} ({})",
                host.id,
                host.outstanding(),
                host.describe_outstanding(),
                if nodes.is_empty() {
                    "every node at rest".to_string()
                } else {
                    nodes.join("; ")
                }
            ));
        }
    }
    for node in &net.nodes {
        if let Some(finding) = node.unrest() {
            return Err(finding);
        }
    }
    if let Some(link) = net.links.iter().position(|link| !link.connected) {
        return Err(format!("link {link} is still severed at the end"));
    }
    Ok(())
}
