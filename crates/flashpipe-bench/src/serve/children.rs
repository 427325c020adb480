//! Running clients of `flashpipe bench serve`: as child processes (the `flashpipe`
//! binary run again with `bench serve-client`) or as threads of the bench process. Every
//! client of a group is prepared and says it is ready before any is told to go, so they
//! start together; each then hands back its [`ClientResult`].

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::roles::{prepare_client, BenchServeClientArgs, ClientResult};
use super::ClientsAs;

/// The hidden subcommand the `flashpipe` binary runs a client role with.
const CLIENT_SUBCOMMAND: [&str; 2] = ["bench", "serve-client"];

enum RunningClient {
    Process {
        child: Child,
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
    },
    Thread {
        go: mpsc::Sender<()>,
        handle: JoinHandle<Result<ClientResult, String>>,
    },
}

/// Clients prepared and ready, waiting for the go.
pub(super) struct ClientGroup {
    clients: Vec<RunningClient>,
}

impl ClientGroup {
    /// Starts one client per entry of `roles`, as `clients_as` says, and waits until
    /// every one is ready. `on_started` runs after each is started and before it is
    /// waited for (to accept its connection, hand it a descriptor).
    pub(super) fn start(
        roles: &[BenchServeClientArgs],
        clients_as: ClientsAs,
        mut on_started: impl FnMut(usize) -> Result<(), String>,
    ) -> Result<ClientGroup, String> {
        let mut clients = Vec::with_capacity(roles.len());
        for (index, role) in roles.iter().enumerate() {
            let (client, ready) = match clients_as {
                ClientsAs::Processes => (start_process(role)?, None),
                ClientsAs::Threads => {
                    let (client, ready) = start_thread(role.clone());
                    (client, Some(ready))
                }
            };
            clients.push(client);
            on_started(index)?;
            let client = clients.last_mut().expect("just pushed");
            wait_until_ready(client, ready)?;
        }
        Ok(ClientGroup { clients })
    }

    /// Tells every client to go and collects their results, in order.
    pub(super) fn go_and_collect(self) -> Result<Vec<ClientResult>, String> {
        self.go()?.collect()
    }

    /// Tells every client to go; [`StartedClients::collect`] gathers their results.
    pub(super) fn go(self) -> Result<StartedClients, String> {
        let mut clients = self.clients;
        for client in &mut clients {
            match client {
                RunningClient::Process { stdin, .. } => stdin
                    .write_all(b"go\n")
                    .and_then(|()| stdin.flush())
                    .map_err(|error| format!("telling a client process to go: {error}"))?,
                RunningClient::Thread { go, .. } => {
                    let _ = go.send(());
                }
            }
        }
        Ok(StartedClients { clients })
    }
}

/// Clients told to go.
pub(super) struct StartedClients {
    clients: Vec<RunningClient>,
}

impl StartedClients {
    /// Waits for every client's result, in order.
    pub(super) fn collect(self) -> Result<Vec<ClientResult>, String> {
        self.clients.into_iter().map(collect).collect()
    }
}

fn start_process(role: &BenchServeClientArgs) -> Result<RunningClient, String> {
    let program = std::env::current_exe()
        .map_err(|error| format!("finding the flashpipe binary to run clients: {error}"))?;
    let mut child = Command::new(&program)
        .args(CLIENT_SUBCOMMAND)
        .args(role.to_command_line())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("starting client process {}: {error}", program.display()))?;
    let stdin = child.stdin.take().expect("stdin was piped");
    let stdout = BufReader::new(child.stdout.take().expect("stdout was piped"));
    Ok(RunningClient::Process {
        child,
        stdin,
        stdout,
    })
}

fn start_thread(role: BenchServeClientArgs) -> (RunningClient, mpsc::Receiver<Result<(), String>>) {
    let (ready_sender, ready) = mpsc::channel();
    let (go, go_receiver) = mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        let prepared = match prepare_client(&role) {
            Ok(prepared) => prepared,
            Err(error) => {
                let _ = ready_sender.send(Err(error.clone()));
                return Err(error);
            }
        };
        let _ = ready_sender.send(Ok(()));
        go_receiver
            .recv()
            .map_err(|_| "the bench stopped before the go".to_string())?;
        prepared()
    });
    (RunningClient::Thread { go, handle }, ready)
}

fn wait_until_ready(
    client: &mut RunningClient,
    ready: Option<mpsc::Receiver<Result<(), String>>>,
) -> Result<(), String> {
    match (client, ready) {
        (RunningClient::Process { stdout, .. }, _) => {
            let line = read_line(stdout)?;
            match line.trim() {
                "ready" => Ok(()),
                other => Err(format!(
                    "a client process said \"{other}\" instead of ready"
                )),
            }
        }
        (RunningClient::Thread { .. }, Some(ready)) => ready
            .recv()
            .map_err(|_| "a client thread ended before it was ready".to_string())?,
        (RunningClient::Thread { .. }, None) => unreachable!("threads come with a ready channel"),
    }
}

fn read_line(stdout: &mut BufReader<ChildStdout>) -> Result<String, String> {
    let mut line = String::new();
    let length = stdout
        .read_line(&mut line)
        .map_err(|error| format!("reading a client process's output: {error}"))?;
    if length == 0 {
        return Err("a client process ended without answering (its error is above)".to_string());
    }
    Ok(line)
}

fn collect(client: RunningClient) -> Result<ClientResult, String> {
    match client {
        RunningClient::Process {
            mut child,
            stdin,
            mut stdout,
        } => {
            drop(stdin);
            let line = read_line(&mut stdout);
            let status = child
                .wait()
                .map_err(|error| format!("waiting for a client process: {error}"))?;
            if !status.success() {
                return Err(format!("a client process failed ({status})"));
            }
            serde_json::from_str(line?.trim())
                .map_err(|error| format!("a client process's result is not JSON: {error}"))
        }
        RunningClient::Thread { handle, .. } => handle
            .join()
            .map_err(|_| "a client thread panicked".to_string())?,
    }
}
