//! A trace file as a replay source: read once to check it whole (every line, the arrival
//! order, plausibility), then again for each pass the replay asks for, one request at a
//! time, so `sim replay` through the FTL holds no trace in memory whatever its length
//! (up to [`workload::MAX_STREAMED_TRACE_REQUESTS`] requests in a file of at most
//! [`workload::MAX_STREAMED_TRACE_FILE_BYTES`]). `--sort` needs every request at once and
//! takes the in-memory path instead.

use std::cell::RefCell;
use std::fs::File;
use std::io::BufReader;

use flashpipe_flash::workload::{
    self, TraceError, TraceFormat, TraceOptions, TraceReader, TraceSummary,
};
use flashpipe_ftl::replay::{ReplaySource, RequestPass};

use crate::error::{invalid_input, io_with, BenchError};
use crate::BenchResult;

/// An error a pass met, kept until the replay ends.
type PassError = Box<dyn std::error::Error>;

/// Bytes read from the file at a time.
const READ_BUFFER_BYTES: usize = 1 << 16;

/// A checked trace file, read again for each pass.
pub(super) struct TraceFile {
    path: String,
    format: TraceFormat,
    options: TraceOptions,
    /// The first error a pass met (the file changed or vanished since the check).
    error: RefCell<Option<PassError>>,
}

impl TraceFile {
    /// Checks the file whole in one pass and returns it with what the pass saw.
    pub(super) fn check(
        path: &str,
        format: TraceFormat,
        options: &TraceOptions,
    ) -> BenchResult<(TraceFile, TraceSummary)> {
        assert!(!options.sort, "a sorted trace is read into memory");
        let metadata =
            std::fs::metadata(path).map_err(io_with(format!("cannot read trace {path}")))?;
        if !metadata.is_file() {
            return Err(invalid_input(format!("trace {path}: not a regular file")).into());
        }
        if metadata.len() > workload::MAX_STREAMED_TRACE_FILE_BYTES {
            return Err(invalid_input(format!(
                "trace {path}: {} bytes, above the limit of {} bytes (1 TiB)",
                metadata.len(),
                workload::MAX_STREAMED_TRACE_FILE_BYTES
            ))
            .into());
        }
        let file = TraceFile {
            path: path.to_string(),
            format,
            options: *options,
            error: RefCell::new(None),
        };
        let mut reader = file.reader()?;
        for item in reader.by_ref() {
            item.map_err(BenchError::from)?;
        }
        let summary = reader.finish().map_err(BenchError::from)?;
        Ok((file, summary))
    }

    fn reader(&self) -> BenchResult<TraceReader<BufReader<File>>> {
        let opened =
            File::open(&self.path).map_err(io_with(format!("cannot read trace {}", self.path)))?;
        Ok(TraceReader::new(
            BufReader::with_capacity(READ_BUFFER_BYTES, opened),
            &self.path,
            self.format,
            &self.options,
            workload::MAX_STREAMED_TRACE_REQUESTS,
        ))
    }

    /// The first error a pass met, if any: the replay's figures are then not the trace's.
    pub(super) fn take_error(&self) -> Option<PassError> {
        self.error.borrow_mut().take()
    }

    fn keep_error(&self, error: PassError) {
        self.error.borrow_mut().get_or_insert(error);
    }
}

impl ReplaySource for TraceFile {
    fn pass(&self) -> RequestPass<'_> {
        match self.reader() {
            Err(error) => {
                self.keep_error(error);
                Box::new(std::iter::empty())
            }
            Ok(reader) => Box::new(reader.map_while(|item| match item {
                Ok((request, _)) => Some(request),
                Err(error) => {
                    self.keep_error(changed(error).into());
                    None
                }
            })),
        }
    }
}

fn changed(error: TraceError) -> BenchError {
    invalid_input(format!(
        "the trace changed while it was replayed (it was checked whole before): {error}"
    ))
}

/// The requests of a pass, for tests.
#[cfg(test)]
fn requests_of(file: &TraceFile) -> Vec<workload::TraceRequest> {
    file.pass().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checked_file_gives_the_same_requests_each_pass_and_a_changed_one_says_so() {
        let folder =
            std::env::temp_dir().join(format!("flashpipe-trace-file-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let path = folder.join("t.trace");
        std::fs::write(&path, "1000 0 0 16 0\n2000 0 16 16 1\n# c\n3000 0 32 8 0\n").unwrap();
        let path = path.to_string_lossy().to_string();
        let options = TraceOptions {
            allow_implausible: true,
            ..TraceOptions::default()
        };
        let (file, summary) =
            TraceFile::check(&path, TraceFormat::AsciiNanoseconds, &options).unwrap();
        assert_eq!((summary.requests, summary.comment_lines), (3, 1));
        let first = requests_of(&file);
        assert_eq!(first.len(), 3);
        assert_eq!(requests_of(&file), first);
        assert!(file.take_error().is_none());
        std::fs::write(&path, "1000 0 0 16 0\nnot a line\n").unwrap();
        assert_eq!(requests_of(&file).len(), 1);
        let error = file
            .take_error()
            .expect("the changed line is reported")
            .to_string();
        assert!(error.contains("changed while it was replayed"), "{error}");
        let error = TraceFile::check(
            &folder.to_string_lossy(),
            TraceFormat::AsciiNanoseconds,
            &options,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(error.contains("not a regular file"), "{error}");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
