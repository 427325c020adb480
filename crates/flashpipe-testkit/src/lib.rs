//! Test support shared by the tests of several flashpipe crates. It is only ever a
//! dev-dependency: production code never links it.
//!
//! - [`cli_args`]: command lines for the tests that run a binary, written as one string of
//!   words.
//! - [`formatted`]: a file system formatted on a device with a given block size.
//! - [`fs_workload`]: the random file-system workload of the crash tests, checked against a
//!   plain in-memory model, and the check a recovered file system must pass. The file
//!   system's own crash test (simulated disks) and the FTL's (emulated flash with power
//!   cuts) both drive it.
//! - [`hooked`]: a block device wrapped with test hooks (count requests, refuse some, hold
//!   completions back until waited for).
//! - [`presets`]: flash presets a test writes (a shipped one changed in one line).
//! - [`scratch`]: a scratch folder per test, removed when dropped, with a listing to check
//!   that refused input changed nothing.
//! - [`seeds`]: which seeds a campaign runs (`FLASHPIPE_SEED`, `FLASHPIPE_SEEDS`, a random
//!   printed base under `FLASHPIPE_LONG=1`) and the
//!   replay line printed when one fails.
//! - [`tally`]: the counters a crash campaign adds up over its seeds ([`tally!`]).
//! - [`tools`]: tools a test drives but the project does not build; a missing one skips the
//!   test with a message, or fails it under `FLASHPIPE_REQUIRE_TOOLS=1` (CI).

pub mod cli_args;
pub mod formatted;
pub mod fs_workload;
pub mod hooked;
pub mod ports;
pub mod presets;
pub mod scratch;
pub mod seeds;
pub mod tally;
pub mod tools;
