//! Shared by the client tests: NBD servers no one here wrote (`nbdkit`, `qemu-nbd`)
//! started on a Unix socket in a scratch folder, killed when dropped, the device opened
//! over them, and a store striped over exports filled and read back.

#![allow(dead_code)]

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flashpipe_device::{BlockDevice, Completion};
use flashpipe_fs::Filesystem;
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::{parse_device_list, STORE_FILE_VERSION};
use flashpipe_store::StoreConfig;

/// Whether `program` is on the PATH; says why the test is skipped when it is not (a failure
/// under `FLASHPIPE_REQUIRE_TOOLS=1`).
pub fn have(program: &str) -> bool {
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string();
    flashpipe_testkit::tools::programs_or_skip(&test, &[program])
}

/// A scratch folder removed when dropped.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(label: &str) -> Scratch {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let number = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("fp-nbd-{label}-{}-{number}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("scratch folder");
        Scratch { path }
    }

    /// A scratch folder for a test that needs `program`; `None` (the test is skipped,
    /// saying why) when it is not on the PATH.
    pub fn if_tool(program: &str, label: &str) -> Option<Scratch> {
        have(program).then(|| Scratch::new(label))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A server process on a Unix socket.
pub struct Server {
    child: Option<Child>,
    pub socket: PathBuf,
    command: Vec<String>,
}

impl Server {
    /// Starts `program args...` (which must listen on `socket`) and waits for the socket.
    pub fn start(program: &str, args: &[String], socket: &Path) -> Server {
        let _ = std::fs::remove_file(socket);
        let mut command = vec![program.to_string()];
        command.extend(args.iter().cloned());
        let mut server = Server {
            child: None,
            socket: socket.to_path_buf(),
            command,
        };
        server.restart();
        server
    }

    /// `nbdkit [ARGS...]` on a socket in `folder` (`ARGS`: options, plugin, parameters).
    pub fn nbdkit(folder: &Path, name: &str, args: &[&str]) -> Server {
        let socket = folder.join(format!("{name}.sock"));
        let mut all = vec![
            "--foreground".to_string(),
            "--exit-with-parent".to_string(),
            "-U".to_string(),
            socket.display().to_string(),
        ];
        all.extend(args.iter().map(|arg| arg.to_string()));
        Server::start("nbdkit", &all, &socket)
    }

    /// `nbdkit memory SIZE` on a socket in `folder`.
    pub fn nbdkit_memory(folder: &Path, name: &str, size: &str) -> Server {
        Server::nbdkit(folder, name, &["memory", size])
    }

    /// `nbdkit file FILE` on a socket in `folder` (the file outlives the server).
    pub fn nbdkit_file(folder: &Path, name: &str, file: &Path) -> Server {
        let file = file.display().to_string();
        Server::nbdkit(folder, name, &["file", &file])
    }

    /// `qemu-nbd -k SOCKET -f raw FILE` (discards honoured, so trimmed blocks read zero).
    pub fn qemu_nbd(folder: &Path, name: &str, file: &Path) -> Server {
        let socket = folder.join(format!("{name}.sock"));
        let args = vec![
            "-k".to_string(),
            socket.display().to_string(),
            "-f".to_string(),
            "raw".to_string(),
            "--discard=unmap".to_string(),
            "--persistent".to_string(),
            file.display().to_string(),
        ];
        Server::start("qemu-nbd", &args, &socket)
    }

    /// The `nbd+unix` URI of the server's default export.
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// Kills the server with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }

    /// Starts the same command again.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {:?}: {error}", self.command));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        // The socket file appears at bind, before the server listens: wait until a
        // connection is accepted (servers take a connection that closes at once).
        while UnixStream::connect(&self.socket).is_err() {
            assert!(
                Instant::now() < deadline,
                "{:?} did not create its socket",
                self.command
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Opens the device over `uri` with queue depth `queue_depth`.
pub fn open(uri: &str, queue_depth: u32) -> NbdDevice {
    let mut config = NbdDeviceConfig::new(NbdUri::parse(uri).expect("a valid URI"));
    config.queue_depth = queue_depth;
    NbdDevice::open(config).unwrap_or_else(|error| panic!("open {uri}: {error}"))
}

/// A zero-filled raw file of `size_bytes`.
pub fn zero_file(path: &Path, size_bytes: u64) {
    let file = std::fs::File::create(path).expect("create image");
    file.set_len(size_bytes).expect("size image");
}

/// The store the client tests stripe over `members` (the URIs of 32 MiB devices): 16 KiB
/// blocks, a 64 KiB stripe unit, queue depth 32.
pub fn striped_store_config(members: &[String]) -> StoreConfig {
    StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes: 16 << 10,
        stripe_unit_bytes: 64 << 10,
        queue_depth: 32,
        devices: parse_device_list(&members.join(","), Some(32 << 20)).expect("device list"),
    }
}

/// Writes `files` (name, contents) into the store at `store_file`, flushes and unmounts.
pub fn fill_store(config: &StoreConfig, store_file: &Path, files: &[(String, Vec<u8>)]) {
    let opened = open_store_device(config, store_file, DeviceCreation::MustExist).unwrap();
    let mut filesystem = Filesystem::mount(opened.device).unwrap();
    for (name, contents) in files {
        let file = filesystem.create(name).unwrap();
        filesystem.write(file, 0, contents).unwrap();
    }
    filesystem.flush().unwrap();
    drop(filesystem.unmount().unwrap());
    drop(opened.lock);
}

/// Mounts the store at `store_file` read-only: every one of `files` reads back whole and
/// fsck finds it clean. The store's size in bytes.
pub fn check_store(config: &StoreConfig, store_file: &Path, files: &[(String, Vec<u8>)]) -> u64 {
    let opened = open_store_device(config, store_file, DeviceCreation::ReadOnly).unwrap();
    let size_bytes = opened.device.info().size_bytes();
    let mut filesystem = Filesystem::mount_read_only(opened.device).unwrap();
    for (name, expected) in files {
        let file = filesystem.open(name).unwrap();
        let read = filesystem.read(file, 0, expected.len() as u64).unwrap();
        assert!(read[..] == expected[..], "{name} differs");
    }
    assert!(filesystem.check().unwrap().is_clean());
    drop(filesystem);
    drop(opened.lock);
    size_bytes
}

/// Waits for every request in flight on `device`; returns their completions.
pub fn reap(device: &mut NbdDevice) -> Vec<Completion> {
    let mut completions = Vec::new();
    while device.in_flight() > 0 {
        device.wait_completions(&mut completions).expect("wait");
    }
    completions
}

/// A Unix socket served on a thread of its own, each connection handed to the server's
/// closure in turn, until dropped: the stop flag is set, one last connection wakes the
/// loop, the thread is joined and the socket file removed.
pub struct AcceptLoop {
    /// The socket the loop listens on.
    pub socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AcceptLoop {
    /// Binds `socket` and serves each connection with `serve`.
    pub fn start(
        socket: PathBuf,
        mut serve: impl FnMut(UnixStream) + Send + 'static,
    ) -> AcceptLoop {
        let listener = UnixListener::bind(&socket).expect("bind");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Ok(stream) = stream {
                        serve(stream);
                    }
                }
            })
        };
        AcceptLoop {
            socket,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.socket);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}
