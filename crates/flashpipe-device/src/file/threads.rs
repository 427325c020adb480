//! The thread-pool engine: worker threads carry out jobs with `pread`/`pwrite`/`fsync`/
//! `fallocate`, fed and drained through crossbeam channels.
//!
//! It is the fallback where io_uring is refused (seccomp filters, old kernels) and the
//! engine for buffered comparisons. It keeps the same contract as the io_uring engine:
//! the job (and its buffer) belongs to the engine until its completion is reaped.
//!
//! Both channels are bounded by the device's queue depth. They can never be full when a
//! job or a completion is sent, so neither side ever blocks on the other: the device
//! submits only with fewer than `queue_depth` jobs in flight (handed over and not yet
//! reaped; `FileDevice::submit` refuses more), and every job waiting in the job channel,
//! being carried out by a worker or waiting as a completion in the completion channel
//! counts as in flight. So each channel holds at most `queue_depth` entries, and a
//! worker's `send` of a completion returns at once even while the engine is not reaping
//! (in `Drop`, the engine drops the job sender and joins the workers with the completion
//! receiver still alive, so a worker finishing its last job does not block either).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};

use super::job::{Action, Job};
use super::open;
use crate::request::Completion;

/// The most worker threads one device starts.
pub const MOST_WORKER_THREADS: u32 = 32;

/// Worker threads with a job queue and a completion queue.
pub struct ThreadPoolEngine {
    job_sender: Option<Sender<Job>>,
    /// Capacity of each channel: the device's queue depth.
    channel_capacity: usize,
    completion_receiver: Receiver<Completion>,
    workers: Vec<JoinHandle<()>>,
    in_flight: usize,
}

impl ThreadPoolEngine {
    /// Starts `min(queue_depth, MOST_WORKER_THREADS)` workers on `file`.
    pub fn start(file: Arc<File>, name: Arc<str>, queue_depth: u32) -> io::Result<Self> {
        let channel_capacity = queue_depth.max(1) as usize;
        let (job_sender, job_receiver) = crossbeam_channel::bounded::<Job>(channel_capacity);
        let (completion_sender, completion_receiver) = crossbeam_channel::bounded(channel_capacity);
        let worker_count = queue_depth.clamp(1, MOST_WORKER_THREADS);
        let mut workers = Vec::with_capacity(worker_count as usize);
        for _ in 0..worker_count {
            let worker = Worker {
                file: Arc::clone(&file),
                name: Arc::clone(&name),
                jobs: job_receiver.clone(),
                completions: completion_sender.clone(),
            };
            let handle = std::thread::Builder::new()
                .name("flashpipe-file-io".to_string())
                .spawn(move || worker.run())?;
            workers.push(handle);
        }
        Ok(ThreadPoolEngine {
            job_sender: Some(job_sender),
            channel_capacity,
            completion_receiver,
            workers,
            in_flight: 0,
        })
    }

    /// Hands a job to the workers; the caller keeps fewer than the queue depth in flight.
    pub fn submit(&mut self, job: Job) {
        assert!(
            self.in_flight < self.channel_capacity,
            "{} jobs in flight: the thread pool's channels hold {} (the queue depth)",
            self.in_flight,
            self.channel_capacity
        );
        match self
            .job_sender
            .as_ref()
            .expect("the job queue lives as long as the engine")
            .try_send(job)
        {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                unreachable!("the job channel holds the queue depth, more than is in flight")
            }
            Err(TrySendError::Disconnected(_)) => {
                unreachable!("workers live as long as the engine")
            }
        }
        self.in_flight += 1;
    }

    /// Moves every ready completion into `completions`.
    pub fn poll(&mut self, completions: &mut Vec<Completion>) -> usize {
        let mut moved = 0;
        loop {
            match self.completion_receiver.try_recv() {
                Ok(completion) => {
                    completions.push(completion);
                    moved += 1;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    unreachable!("workers hold the completion queue while the engine lives")
                }
            }
        }
        self.in_flight -= moved;
        moved
    }

    /// Blocks until at least one completion is ready, then moves every ready one.
    pub fn wait(&mut self, completions: &mut Vec<Completion>) -> usize {
        assert!(self.in_flight > 0, "wait needs a job in flight");
        let first = self
            .completion_receiver
            .recv()
            .expect("workers hold the completion queue while jobs are in flight");
        completions.push(first);
        self.in_flight -= 1;
        1 + self.poll(completions)
    }

    /// Jobs handed over and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

impl Drop for ThreadPoolEngine {
    fn drop(&mut self) {
        drop(self.job_sender.take());
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

struct Worker {
    file: Arc<File>,
    name: Arc<str>,
    jobs: Receiver<Job>,
    completions: Sender<Completion>,
}

impl Worker {
    fn run(self) {
        while let Ok(mut job) = self.jobs.recv() {
            let result = execute(&self.file, &mut job);
            let completion = job.complete(&self.name, result);
            if self.completions.send(completion).is_err() {
                return;
            }
        }
    }
}

/// Carries out one job; returns the bytes moved (0 for flush and trim).
fn execute(file: &File, job: &mut Job) -> io::Result<usize> {
    retry_on_interrupt(|| match job.action {
        Action::Read { offset_bytes } => {
            let buffer = job.buffer.as_mut().expect("reads carry a buffer");
            file.read_at(buffer.as_mut_slice(), offset_bytes)
        }
        Action::Write { offset_bytes } => {
            let buffer = job.buffer.as_ref().expect("writes carry a buffer");
            file.write_at(buffer.as_slice(), offset_bytes)
        }
        Action::Flush => file.sync_all().map(|()| 0),
        Action::PunchHole {
            offset_bytes,
            length_bytes,
        } => open::punch_hole(file.as_raw_fd(), offset_bytes, length_bytes).map(|()| 0),
        Action::Discard {
            offset_bytes,
            length_bytes,
        } => open::discard(file.as_raw_fd(), offset_bytes, length_bytes).map(|()| 0),
    })
}

fn retry_on_interrupt(mut call: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match call() {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}
