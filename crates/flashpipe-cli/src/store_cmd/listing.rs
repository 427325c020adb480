//! The commands that tell about the store: `ls`, `stat` and `df`. `ls -l`, `stat` and
//! their `--json` show the mode, owner and modification time a user set (`chmod`, `chown`,
//! `touch -d` through a mount), `-` (`null` in JSON) where none is set.

use flashpipe_api::TransportExt;
use flashpipe_fs::FileStat;
use flashpipe_store::units::HumanBytes;
use serde_json::json;

use super::names::{list_files, resolve_names, FolderRule};
use super::{open_session, CliResult, LsArgs, NamesArgs, StoreAccess, StoreArgs};
use crate::error_kind::{ErrorKind, Failure};
use crate::session::{with_transport, SessionResult};

/// Runs `ls`: every file, or those the names, prefixes and patterns given stand for.
/// The listing goes to standard output, the summary line to standard error.
pub fn run_ls(arguments: LsArgs) -> CliResult {
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let clock_is_virtual = session.clock_is_virtual();
    let files = with_transport!(session, |store| {
        if arguments.names.is_empty() {
            list_files(store, &[])
        } else {
            resolve_names(store, &arguments.names, FolderRule::Expand)
                .and_then(|names| list_files(store, &names))
        }
    });
    let files = session.finish(files)?;
    if arguments.store.json {
        let rows: Vec<_> = files.iter().map(file_json).collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    let size = |bytes: u64| {
        if arguments.human {
            HumanBytes(bytes).to_string()
        } else {
            bytes.to_string()
        }
    };
    for file in &files {
        if arguments.one_per_line {
            println!("{}", file.name);
        } else if arguments.long {
            let modified = match file.modified_wall_ns {
                Some(wall_ns) => wall_time_text(wall_ns),
                None => modified_time_text(file.modified_clock_ns, clock_is_virtual),
            };
            println!(
                "{:>14} {:>8} {:>14} {:>8} {:>4} {:>21} {:>23}  {}",
                size(file.size_bytes),
                file.allocated_blocks,
                size(file.shared_bytes),
                file.file_id.0,
                mode_text(file.mode),
                owner_text(file),
                modified,
                file.name
            );
        } else {
            println!("{:>14}  {}", size(file.size_bytes), file.name);
        }
    }
    let total_bytes: u64 = files.iter().map(|file| file.size_bytes).sum();
    eprintln!("{} file(s), {}", files.len(), HumanBytes(total_bytes));
    Ok(())
}

/// A file's modification time for `ls -l`: UTC date and time on a real clock (its
/// nanoseconds count from the Unix epoch), seconds of simulated device time on a virtual one.
fn modified_time_text(clock_ns: u64, clock_is_virtual: bool) -> String {
    if clock_is_virtual {
        return format!("{:.6} s (device)", clock_ns as f64 / 1e9);
    }
    let seconds = clock_ns / 1_000_000_000;
    let (year, month, day) = civil_date_of_days(seconds / 86_400);
    let second_of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

/// A mode a user set, in octal (`0600`), or `-`.
fn mode_text(mode: Option<u32>) -> String {
    mode.map_or_else(|| "-".to_string(), |mode| format!("{mode:04o}"))
}

/// An owner a user set as `uid:gid`, or `-`.
fn owner_text(file: &FileStat) -> String {
    file.owner.map_or_else(
        || "-".to_string(),
        |owner| format!("{}:{}", owner.uid, owner.gid),
    )
}

/// A wall-clock time a user set (ns since the Unix epoch) as a UTC date and time; one
/// before the epoch (another program may store it) as seconds before it.
fn wall_time_text(wall_ns: i64) -> String {
    match u64::try_from(wall_ns) {
        Ok(ns) => modified_time_text(ns, false),
        Err(_) => format!(
            "{} s before 1970",
            wall_ns.unsigned_abs().div_ceil(1_000_000_000)
        ),
    }
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_date_of_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

fn file_json(file: &FileStat) -> serde_json::Value {
    json!({"name": file.name, "size_bytes": file.size_bytes, "file_id": file.file_id.0,
           "allocated_blocks": file.allocated_blocks, "shared_bytes": file.shared_bytes,
           "modified_clock_ns": file.modified_clock_ns, "mode": file.mode,
           "owner": file.owner.map(|owner| json!({"uid": owner.uid, "gid": owner.gid})),
           "modified_wall_ns": file.modified_wall_ns})
}

/// Runs `stat`.
pub fn run_stat(arguments: NamesArgs) -> CliResult {
    if arguments.names.is_empty() {
        return Err(Failure::new(ErrorKind::Usage, "stat needs at least one file name").into());
    }
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let files = with_transport!(session, |store| {
        resolve_names(store, &arguments.names, FolderRule::Refuse)
            .and_then(|names| list_files(store, &names))
    });
    let files = session.finish(files)?;
    if arguments.store.json {
        println!(
            "{}",
            serde_json::Value::Array(files.iter().map(file_json).collect())
        );
        return Ok(());
    }
    for file in files {
        println!(
            "{}: {} bytes ({}), file id {}, {} blocks allocated, {} bytes in shared blocks ({}), \
             mode {}, owner {}, modified {}",
            file.name,
            file.size_bytes,
            HumanBytes(file.size_bytes),
            file.file_id.0,
            file.allocated_blocks,
            file.shared_bytes,
            HumanBytes(file.shared_bytes),
            mode_text(file.mode),
            owner_text(&file),
            file.modified_wall_ns
                .map_or_else(|| "-".to_string(), wall_time_text)
        );
    }
    Ok(())
}

/// Runs `df`.
pub fn run_df(arguments: StoreArgs) -> CliResult {
    let mut session = open_session(&arguments, StoreAccess::ReadOnly)?;
    let stats = with_transport!(session, |store| store.stats().session().map_err(Into::into));
    let stats = session.finish(stats)?;
    let block_bytes = u64::from(stats.fs_block_size_bytes);
    if arguments.json {
        println!(
            "{}",
            json!({"block_size_bytes": block_bytes, "total_bytes": stats.fs_block_count * block_bytes,
                   "used_bytes": stats.used_blocks * block_bytes, "free_bytes": stats.free_blocks * block_bytes,
                   "shared_blocks": stats.shared_blocks, "shared_bytes": stats.shared_blocks * block_bytes,
                   "saved_bytes": stats.saved_blocks * block_bytes,
                   "reserved_bytes": stats.reserved_blocks * block_bytes, "file_count": stats.file_count,
                   "commit_sequence": stats.commit_sequence})
        );
    } else {
        println!(
            "{} total, {} used ({} in shared blocks, counted once; \
             sharing saves {}), {} free ({} kept for the next commit), {} file(s), commit {}",
            HumanBytes(stats.fs_block_count * block_bytes),
            HumanBytes(stats.used_blocks * block_bytes),
            HumanBytes(stats.shared_blocks * block_bytes),
            HumanBytes(stats.saved_blocks * block_bytes),
            HumanBytes(stats.free_blocks * block_bytes),
            HumanBytes(stats.reserved_blocks * block_bytes),
            stats.file_count,
            stats.commit_sequence
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_known_days() {
        assert_eq!(civil_date_of_days(0), (1970, 1, 1));
        assert_eq!(civil_date_of_days(59), (1970, 3, 1));
        assert_eq!(civil_date_of_days(11_016), (2000, 2, 29));
        assert_eq!(civil_date_of_days(20_780), (2026, 11, 23));
    }

    #[test]
    fn modified_times_say_their_clock() {
        let noon_ns = (20_780 * 86_400 + 12 * 3600 + 34 * 60 + 56) * 1_000_000_000;
        assert_eq!(modified_time_text(noon_ns, false), "2026-11-23 12:34:56");
        assert_eq!(
            modified_time_text(1_500_000_000, true),
            "1.500000 s (device)"
        );
    }

    #[test]
    fn attributes_a_user_set_or_a_dash() {
        assert_eq!(mode_text(Some(0o600)), "0600");
        assert_eq!(mode_text(Some(0)), "0000");
        assert_eq!(mode_text(None), "-");
        assert_eq!(
            wall_time_text(1_700_000_000_000_000_000),
            "2023-11-14 22:13:20"
        );
        assert_eq!(wall_time_text(-1), "1 s before 1970");
        assert_eq!(wall_time_text(-86_400_000_000_000), "86400 s before 1970");
    }
}
