//! One campaign: one seed, one world, the whole stack under a fault plan.
//!
//! A run, per seed:
//! 1. a [`World`] from the seed; a [`SimNetwork`] joins it with 2 to 4 NBD disk nodes
//!    whose links delay, reset, garble, close and refuse by seeded chances;
//! 2. the NBD client over each node, a stripe over them, a file system formatted on the
//!    stripe, the stepped engine on the file system and three clients;
//! 3. rounds: the faults the [`FaultPlan`] puts at the round strike, a batch of random
//!    commands is submitted and the engine stepped until idle (in a crash round, only
//!    a random number of steps before the power fails); each reply is checked against
//!    the model, and each acknowledged flush becomes what must survive;
//! 4. a crash (planned, or after a command failed because of a fault) is a power loss of
//!    everything: the engine and client devices are dropped, every node loses what no
//!    flush covered, the file system is mounted again over fresh connections, fsck must
//!    be clean and the files must be those of the last acknowledged flush or of a flush
//!    that was in progress; then a new engine goes on.
//!
//! A command may fail only when a fault could explain it (a connection reset, a node
//! restart or outage, a failing node); a failure with none is a finding too.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::{BlockDevice, SplitMix64};
use flashpipe_engine::{
    Command, EngineClient, EngineConfig, StepOutcome, SteppedEngine, WritePath,
};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_nbd::client::{
    SimLinkConfig, SimNbdDevice, SimNbdDeviceConfig, SimNetwork, SimNetworkCounters, SimNodeConfig,
};
use flashpipe_server::CoreLimits;
use flashpipe_sim::{FaultKind, FaultPlan, FaultPlanConfig, World};

use crate::planted::{LyingFlushes, PlantedBug};
use crate::served::{Answer, Outcome, ServedClient};
use crate::workload::{
    agrees_outside, changed_names, describe, digest, draw_command, Expected, Model, Submitted,
    BLOCK_BYTES,
};

const CLIENT_COUNT: usize = 3;
const CLIENT_OUTSTANDING_LIMIT: usize = 16;
/// The client whose commands go through the store server's request rules as frames
/// (the one that also sends the last flush).
const SERVED_CLIENT: usize = 0;
/// The served client's connection limits: those of a default server, but for requests
/// in flight (the client's own outstanding limit) and reads (the engine's).
const SERVED_LIMITS: CoreLimits = CoreLimits {
    max_in_flight: CLIENT_OUTSTANDING_LIMIT,
    max_write_bytes: 1 << 20,
    max_bytes_in_flight: 64 << 20,
    max_read_bytes: ENGINE_CONFIG.max_read_bytes as u64,
    max_read_files_bytes: 64 << 20,
};
const NODE_SIZE_BYTES: u64 = 8 << 20;
const STRIPE_UNIT_BYTES: u64 = 16 << 10;
/// Virtual time a node taken down stays down, at most.
const OUTAGE_NS_MAX: u64 = 3_000_000_000;

/// The stepped engine's configuration in every campaign (and in the engine's own
/// simulation test): small bounds, so queues and pools fill under the workload.
pub const ENGINE_CONFIG: EngineConfig = EngineConfig {
    command_queue_capacity: 64,
    read_buffer_count: 32,
    max_read_bytes: 64 * 1024,
    reads_in_flight_limit: 16,
    handoff: flashpipe_engine::Handoff::DEFAULT,
    flush_grouping: flashpipe_engine::FlushGrouping::UntilNextChange,
    write_path: WritePath::Overlapped,
    read_pool_memory: flashpipe_engine::PoolMemory::Heap,
};

/// What a campaign runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CampaignConfig {
    /// Rounds of commands per seed (faults strike at rounds).
    pub rounds: u64,
    /// A bug planted on purpose, or none.
    pub planted_bug: Option<PlantedBug>,
    /// Print each round (faults, commands, replies, recoveries) to standard error, for
    /// reading a replayed seed.
    pub trace: bool,
}

impl Default for CampaignConfig {
    fn default() -> Self {
        CampaignConfig {
            rounds: 48,
            planted_bug: None,
            trace: false,
        }
    }
}

/// What one seed went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CampaignReport {
    /// The seed.
    pub seed: u64,
    /// A sum of the history (network events, virtual time, replies, the files at the
    /// end): the same seed gives the same value.
    pub fingerprint: u64,
    /// Disk nodes.
    pub node_count: usize,
    /// Power losses recovered from (planned ones, ones after a failed command, and the
    /// last one).
    pub crashes: u64,
    /// Recoveries that found the files of a flush in progress rather than the last
    /// acknowledged one.
    pub interrupted_flushes_found: u64,
    /// Commands answered.
    pub commands_answered: u64,
    /// Commands that failed (each explained by a fault).
    pub commands_failed: u64,
    /// Flushes acknowledged.
    pub flushes_acknowledged: u64,
    /// Faults of the plan that struck.
    pub faults_struck: u64,
    /// Virtual time at the end, nanoseconds.
    pub virtual_time_ns: u64,
    /// The network's counters at the end.
    pub network: SimNetworkCounters,
}

/// A seed that found something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CampaignFailure {
    /// The seed.
    pub seed: u64,
    /// The round it happened in.
    pub round: u64,
    /// What went wrong.
    pub finding: String,
}

impl fmt::Display for CampaignFailure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "seed {} failed at round {}: {}; FLASHPIPE_SEED={} replays",
            self.seed, self.round, self.finding, self.seed
        )
    }
}

/// The campaign runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct Campaign {
    config: CampaignConfig,
}

/// The stack above the network: the engine and its clients.
struct Stack {
    engine: SteppedEngine,
    clients: Vec<CampaignClient>,
}

/// One of the campaign's clients: in process, or served (through the store server's
/// request rules, as frames).
enum CampaignClient {
    InProcess(EngineClient),
    Served(ServedClient),
}

impl CampaignClient {
    /// Submits `command`; its ticket, or why it could not be submitted.
    fn submit(&mut self, command: Command) -> Result<u64, String> {
        match self {
            CampaignClient::InProcess(client) => client
                .try_submit(command)
                .map_err(|error| error.to_string()),
            CampaignClient::Served(client) => client.submit(command),
        }
    }

    /// Every answer that has arrived, by ticket.
    fn take_answers(&mut self) -> Vec<(u64, Outcome)> {
        match self {
            CampaignClient::InProcess(client) => {
                std::iter::from_fn(|| client.try_next_completion())
                    .map(|(ticket, result)| (ticket, Answer::of_engine(result)))
                    .collect()
            }
            CampaignClient::Served(client) => client.take_answers(),
        }
    }
}

/// One run's state.
struct Run {
    seed: u64,
    config: CampaignConfig,
    network: SimNetwork,
    node_count: usize,
    rng: SplitMix64,
    report: CampaignReport,
    /// The files as the commands submitted so far leave them.
    model: Model,
    /// The files of the last acknowledged flush (what must survive).
    committed: Model,
    /// Network counters at the last recovery (to tell whether a fault struck since).
    counters_at_recovery: SimNetworkCounters,
    /// A fault that fails commands (restart, outage, failing node) struck since the last
    /// recovery.
    disruptive_fault_since_recovery: bool,
    /// Rounds at which a failing node stops failing.
    failing_until: Vec<(u64, usize)>,
}

impl Campaign {
    /// A campaign with `config`.
    pub fn new(config: CampaignConfig) -> Campaign {
        Campaign { config }
    }

    /// Runs one seed.
    pub fn run(&self, seed: u64) -> Result<CampaignReport, CampaignFailure> {
        let mut world = World::new(seed);
        let network = SimNetwork::join(&mut world);
        let mut rng = world.stream();
        let node_count = 2 + rng.index_below(3);
        for node in 0..node_count {
            network
                .add_node(node_config(node, &mut rng))
                .map_err(|error| failure(seed, 0, format!("adding a node: {error}")))?;
        }
        let plan = FaultPlan::draw(
            &FaultPlanConfig {
                horizon_steps: self.config.rounds.max(1),
                node_count,
                crashes_max: 3,
                node_restarts_max: 2,
                partitions_max: 3,
                outages_max: 2,
                slow_devices_max: 2,
                failing_devices_max: 1,
            },
            &mut world.stream(),
        );
        let mut run = Run {
            seed,
            config: self.config,
            network,
            node_count,
            rng,
            report: CampaignReport {
                seed,
                node_count,
                ..CampaignReport::default()
            },
            model: Model::new(),
            committed: Model::new(),
            counters_at_recovery: SimNetworkCounters::default(),
            disruptive_fault_since_recovery: false,
            failing_until: Vec::new(),
        };
        let filesystem = run.format()?;
        let mut stack = Some(run.stack(filesystem));
        for round in 0..self.config.rounds {
            let mut crash_now = false;
            for fault in plan.at(round) {
                run.trace(round, &format!("fault {:?}", fault.kind));
                run.report.faults_struck += 1;
                crash_now |= run.strike(round, fault.kind);
            }
            run.end_failing_spells(round);
            let current = stack.take().expect("a stack between rounds");
            stack = Some(run.round(round, current, crash_now)?);
        }
        let current = stack.take().expect("a stack at the end");
        run.final_flush(current)?;
        run.report.virtual_time_ns = run.network.now_ns();
        run.report.network = run.network.counters();
        run.report.fingerprint = fingerprint(
            &run.report,
            run.network.history_fingerprint(),
            &run.committed,
        );
        Ok(run.report)
    }
}

fn failure(seed: u64, round: u64, finding: String) -> CampaignFailure {
    CampaignFailure {
        seed,
        round,
        finding,
    }
}

fn node_config(node: usize, rng: &mut SplitMix64) -> SimNodeConfig {
    let mut chance = |max: f64| max * (rng.below(1_001) as f64 / 1_000.0);
    let link = SimLinkConfig {
        delay_ns_min: 5_000,
        delay_ns_max: 120_000,
        service_ns_max: 40_000,
        sever_probability: chance(0.002),
        silent_loss_probability: chance(0.0005),
        garble_probability: chance(0.001),
        close_probability: chance(0.001),
        refuse_probability: chance(0.2),
    };
    SimNodeConfig {
        name: format!("node{node}"),
        size_bytes: NODE_SIZE_BYTES,
        structured_replies: rng.chance(0.5),
        maximum_payload_bytes: 64 << (rng.below(5) + 10),
        link,
    }
}

fn fingerprint(report: &CampaignReport, network_fingerprint: u64, files: &Model) -> u64 {
    let values = [
        network_fingerprint,
        report.virtual_time_ns,
        report.commands_answered,
        report.commands_failed,
        report.flushes_acknowledged,
        report.crashes,
        digest(files),
    ];
    values.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &value| {
        (hash ^ value).wrapping_mul(0x0100_0000_01b3)
    })
}

/// How the checks of one round ended.
struct RoundChecks {
    /// A command failed or was never answered.
    disturbed: bool,
    /// The first failure's text.
    first_error: Option<String>,
    /// Flushes submitted after the last acknowledged one and not acknowledged: the
    /// files a recovery may find besides the committed ones.
    in_progress: Vec<Model>,
    /// Files that commands which failed would have changed: a failed change may be
    /// applied in full, in part or not at all, so a recovery does not judge them.
    uncertain: BTreeSet<String>,
}

impl Run {
    fn trace(&self, round: u64, line: &str) {
        if self.config.trace {
            eprintln!(
                "seed {} round {round} at {} ns: {line}",
                self.seed,
                self.network.now_ns()
            );
        }
    }

    fn fail(&self, round: u64, finding: String) -> CampaignFailure {
        failure(self.seed, round, finding)
    }

    /// The NBD client over every node, striped (with the planted bug, if any, on top).
    fn open_device(&self, round: u64) -> Result<Box<dyn BlockDevice>, CampaignFailure> {
        let mut members: Vec<Box<dyn BlockDevice>> = Vec::with_capacity(self.node_count);
        for node in 0..self.node_count {
            let config = SimNbdDeviceConfig {
                reconnect_attempts: 10,
                reply_timeout_ms: 500,
                ..SimNbdDeviceConfig::new(node, BLOCK_BYTES as u32)
            };
            let device = SimNbdDevice::open(&self.network, config)
                .map_err(|error| self.fail(round, format!("opening node {node}: {error}")))?;
            members.push(Box::new(device));
        }
        let stripe = StripedDevice::new(
            "stripe",
            members,
            STRIPE_UNIT_BYTES,
            CompletionOrder::AsCompleted,
            32,
        )
        .map_err(|error| self.fail(round, format!("striping the nodes: {error}")))?;
        Ok(match self.config.planted_bug {
            Some(PlantedBug::FlushAcknowledgedUnflushed) => {
                Box::new(LyingFlushes::new(Box::new(stripe)))
            }
            None => Box::new(stripe),
        })
    }

    /// Formats the stripe; a format that a link fault broke is tried again on fresh
    /// connections (a few times).
    fn format(&mut self) -> Result<Filesystem, CampaignFailure> {
        let options = FormatOptions {
            fs_block_size_bytes: BLOCK_BYTES as u32,
            store_identity: None,
        };
        let mut attempts_left = 8;
        loop {
            let device = self.open_device(0)?;
            match Filesystem::format(device, &options) {
                Ok(filesystem) => {
                    self.counters_at_recovery = self.network.counters();
                    return Ok(filesystem);
                }
                Err(error) if attempts_left > 0 && self.fault_explains_failure() => {
                    self.trace(0, &format!("format failed under a link fault: {error}"));
                    attempts_left -= 1;
                    self.counters_at_recovery = self.network.counters();
                }
                Err(error) => {
                    return Err(self.fail(0, format!("formatting the stripe: {error}")));
                }
            }
        }
    }

    fn stack(&self, filesystem: Filesystem) -> Stack {
        let engine = SteppedEngine::new(filesystem, ENGINE_CONFIG);
        let clients = (0..CLIENT_COUNT)
            .map(|index| {
                let client = engine.client(CLIENT_OUTSTANDING_LIMIT);
                match index {
                    SERVED_CLIENT => {
                        CampaignClient::Served(ServedClient::new(client, SERVED_LIMITS))
                    }
                    _ => CampaignClient::InProcess(client),
                }
            })
            .collect();
        Stack { engine, clients }
    }

    /// Applies one fault; true for a power loss (which the round carries out).
    fn strike(&mut self, round: u64, kind: FaultKind) -> bool {
        match kind {
            FaultKind::Crash => return true,
            FaultKind::RestartNode { node } => {
                self.network.restart_node(node);
                self.disruptive_fault_since_recovery = true;
            }
            FaultKind::Partition { node } => self.network.partition(node),
            FaultKind::Outage {
                node,
                duration_steps,
            } => {
                let duration_ns = (duration_steps * 200_000_000).min(OUTAGE_NS_MAX);
                self.network.take_down_for(node, duration_ns);
                self.disruptive_fault_since_recovery = true;
            }
            FaultKind::SlowDevice { node, factor } => self.network.slow_down(node, factor),
            FaultKind::FailingDevice {
                node,
                failure_ppm,
                duration_steps,
            } => {
                let probability = f64::from(failure_ppm) / 1_000_000.0;
                self.network
                    .set_failure_probability(node, probability.min(1.0));
                self.failing_until.push((round + duration_steps, node));
                self.disruptive_fault_since_recovery = true;
            }
        }
        false
    }

    fn end_failing_spells(&mut self, round: u64) {
        let network = &self.network;
        self.failing_until.retain(|&(until, node)| {
            let over = until <= round;
            if over {
                network.set_failure_probability(node, 0.0);
            }
            !over
        });
    }

    /// Whether a fault since the last recovery explains a failed command.
    fn fault_explains_failure(&self) -> bool {
        let now = self.network.counters();
        let then = self.counters_at_recovery;
        self.disruptive_fault_since_recovery
            || now.connections_reset > then.connections_reset
            || now.connections_partitioned > then.connections_partitioned
            || now.attempts_refused > then.attempts_refused
            || now.replies_garbled > then.replies_garbled
            || now.requests_failed > then.requests_failed
            || now.node_restarts > then.node_restarts
    }

    /// One round of commands; a crash round loses power after a few engine steps.
    fn round(
        &mut self,
        round: u64,
        mut stack: Stack,
        crash_now: bool,
    ) -> Result<Stack, CampaignFailure> {
        let mut submitted = Vec::new();
        for _ in 0..1 + self.rng.below(12) {
            let client = self.rng.index_below(CLIENT_COUNT);
            let (command, what, expected) = draw_command(&mut self.rng, &mut self.model);
            let changes = changed_names(&command);
            let ticket = stack.clients[client]
                .submit(command)
                .map_err(|error| self.fail(round, format!("submitting {what}: {error}")))?;
            submitted.push(Submitted {
                client,
                ticket,
                what,
                expected,
                changes,
            });
        }
        let engine_error = if crash_now {
            let steps = self.rng.below(60);
            let mut error = None;
            for _ in 0..steps {
                match stack.engine.step() {
                    Ok(StepOutcome::Progressed) => {}
                    Ok(StepOutcome::Idle) => break,
                    Err(failed) => {
                        error = Some(failed);
                        break;
                    }
                }
            }
            error
        } else {
            stack.engine.run_until_idle().err()
        };
        let replies = collect_replies(&mut stack.clients);
        let checks = self.check(round, submitted, replies)?;
        if !(crash_now || checks.disturbed || engine_error.is_some()) {
            return Ok(stack);
        }
        if !crash_now && !self.fault_explains_failure() {
            let error = checks
                .first_error
                .or(engine_error.map(|error| error.to_string()))
                .unwrap_or_else(|| "a command was never answered".to_string());
            return Err(self.fail(
                round,
                format!("a command failed with no fault to explain it: {error}"),
            ));
        }
        drop(stack);
        self.recover(round, &checks)
    }

    /// Checks replies in submission order up to the first command that failed or was
    /// never answered; each acknowledged flush becomes what must survive.
    fn check(
        &mut self,
        round: u64,
        submitted: Vec<Submitted>,
        mut replies: HashMap<(usize, u64), Outcome>,
    ) -> Result<RoundChecks, CampaignFailure> {
        let mut checks = RoundChecks {
            disturbed: false,
            first_error: None,
            in_progress: Vec::new(),
            uncertain: BTreeSet::new(),
        };
        for command in submitted {
            let reply = replies.remove(&(command.client, command.ticket));
            if self.config.trace {
                let outcome = match &reply {
                    None => "no reply".to_string(),
                    Some(Ok(_)) => "ok".to_string(),
                    Some(Err(error)) => format!("failed: {error}"),
                };
                self.trace(
                    round,
                    &format!("client {} {}: {outcome}", command.client, command.what),
                );
            }
            if checks.disturbed {
                if let Some(Err(_)) = reply {
                    self.report.commands_failed += 1;
                    checks.uncertain.extend(command.changes.iter().cloned());
                }
                if let Expected::Flushed(model) = command.expected {
                    checks.in_progress.push(model);
                }
                continue;
            }
            let reply = match reply {
                Some(Ok(reply)) => reply,
                failed => {
                    checks.disturbed = true;
                    if let Some(Err(error)) = failed {
                        self.report.commands_failed += 1;
                        checks.first_error = Some(format!("{}: {error}", command.what));
                        checks.uncertain.extend(command.changes.iter().cloned());
                    }
                    if let Expected::Flushed(model) = command.expected {
                        checks.in_progress.push(model);
                    }
                    continue;
                }
            };
            self.report.commands_answered += 1;
            match (command.expected, reply) {
                (Expected::Done, Answer::Done) | (Expected::Written, Answer::Written) => {}
                (Expected::Data(expected), Answer::Data(data)) => {
                    if data != expected {
                        return Err(self.fail(
                            round,
                            format!("{} returned other bytes than were written", command.what),
                        ));
                    }
                }
                (Expected::Files(expected), Answer::Files(files)) => {
                    if files.len() != expected.len() {
                        return Err(self.fail(
                            round,
                            format!(
                                "{} returned {} files for {} names",
                                command.what,
                                files.len(),
                                expected.len()
                            ),
                        ));
                    }
                    for (found, expected) in files.into_iter().zip(expected) {
                        match found {
                            Ok(found) if found == expected => {}
                            Ok(_) => {
                                return Err(self.fail(
                                    round,
                                    format!(
                                        "{} returned other bytes than were written",
                                        command.what
                                    ),
                                ))
                            }
                            Err(error) => {
                                checks.disturbed = true;
                                self.report.commands_failed += 1;
                                checks.first_error = Some(format!("{}: {error}", command.what));
                            }
                        }
                    }
                }
                (Expected::Flushed(model), Answer::Done) => {
                    self.committed = model;
                    self.report.flushes_acknowledged += 1;
                    checks.in_progress.clear();
                }
                (_, _) => {
                    return Err(self.fail(
                        round,
                        format!("{} got a reply of another kind", command.what),
                    ))
                }
            }
        }
        Ok(checks)
    }

    /// A power loss of everything, then recovery: every node loses what no flush covered,
    /// the file system is mounted again over fresh connections, fsck must be clean and
    /// the files those of the last acknowledged flush (or of a flush in progress).
    fn recover(&mut self, round: u64, checks: &RoundChecks) -> Result<Stack, CampaignFailure> {
        let in_progress = &checks.in_progress;
        self.report.crashes += 1;
        self.trace(
            round,
            &format!(
                "power loss; recovery expects [{}] or one of {} flushes in progress",
                describe(&self.committed),
                in_progress.len()
            ),
        );
        for node in 0..self.node_count {
            self.network.bring_up(node);
            self.network.set_failure_probability(node, 0.0);
            self.network.restart_node(node);
        }
        self.failing_until.clear();
        let device = self.open_device(round)?;
        let mut filesystem = Filesystem::mount(device)
            .map_err(|error| self.fail(round, format!("mounting after a crash: {error}")))?;
        let fsck = filesystem
            .check()
            .map_err(|error| self.fail(round, format!("fsck after a crash: {error}")))?;
        if !fsck.is_clean() {
            return Err(self.fail(
                round,
                format!("fsck after a crash found {} problems", fsck.findings.len()),
            ));
        }
        let mut found = Model::new();
        for stat in filesystem.list() {
            let bytes = filesystem
                .read(stat.file_id, 0, stat.size_bytes)
                .map_err(|error| {
                    self.fail(
                        round,
                        format!("reading {} after a crash: {error}", stat.name),
                    )
                })?;
            found.insert(stat.name, bytes.to_vec());
        }
        if found != self.committed {
            let explained = std::iter::once(&self.committed)
                .chain(in_progress)
                .any(|expected| agrees_outside(&found, expected, &checks.uncertain));
            if !explained {
                return Err(self.fail(
                    round,
                    format!(
                        "after a crash the files are [{}], but the last acknowledged flush had [{}]",
                        describe(&found),
                        describe(&self.committed)
                    ),
                ));
            }
            self.report.interrupted_flushes_found += 1;
        }
        self.committed = found.clone();
        self.model = found;
        self.counters_at_recovery = self.network.counters();
        self.disruptive_fault_since_recovery = false;
        Ok(self.stack(filesystem))
    }

    /// The end: a last flush, then a last power loss and recovery, which must find it.
    fn final_flush(&mut self, mut stack: Stack) -> Result<(), CampaignFailure> {
        let round = self.config.rounds;
        let ticket = stack.clients[0]
            .submit(Command::Flush)
            .map_err(|error| self.fail(round, format!("submitting the last flush: {error}")))?;
        let engine_error = stack.engine.run_until_idle().err();
        let replies = collect_replies(&mut stack.clients);
        let submitted = vec![Submitted {
            client: 0,
            ticket,
            what: "the last flush".to_string(),
            expected: Expected::Flushed(self.model.clone()),
            changes: Vec::new(),
        }];
        let checks = self.check(round, submitted, replies)?;
        if (checks.disturbed || engine_error.is_some()) && !self.fault_explains_failure() {
            return Err(self.fail(
                round,
                "the last flush failed with no fault to explain it".to_string(),
            ));
        }
        drop(stack);
        self.recover(round, &checks).map(drop)
    }
}

/// Every reply that has arrived, by (client, ticket).
fn collect_replies(clients: &mut [CampaignClient]) -> HashMap<(usize, u64), Outcome> {
    let mut replies = HashMap::new();
    for (index, client) in clients.iter_mut().enumerate() {
        for (ticket, outcome) in client.take_answers() {
            replies.insert((index, ticket), outcome);
        }
    }
    replies
}
