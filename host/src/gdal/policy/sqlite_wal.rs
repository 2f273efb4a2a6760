//! SQLite inputs in write-ahead-log mode, read without writing them (attack round 12, R12-5).
//!
//! GDAL 3.6 closes a SQLite database it opened read-only (GeoPackage, SpatiaLite, MBTiles)
//! and, when `<name>-wal` is there, opens it again read-write for a dummy query "to make the
//! spurious -wal and -shm files disappear" (`OGRSQLiteBaseDataSource::CloseDB`). Closing that
//! connection, the last one, checkpoints the log into the database and deletes `-wal` and
//! `-shm`: a read-only `vector_info` rewrote its input (its SHA-256 changed) and then said the
//! input changed while it was read. GDAL's `NOLOCK=YES` open option reads the log but still
//! checkpoints, and `IMMUTABLE=YES` checkpoints and reads the stale database (measured with
//! GDAL 3.6.2 and SQLite 3.40.1).
//!
//! What holds: before GDAL opens such a database, the job opens its own connection with the
//! system SQLite (the library GDAL uses, so the two share SQLite's per-file lock table in this
//! process), read-only and with a read-only `-shm` (`mode=ro&readonly_shm=1`), reads its
//! schema, and keeps it open until the job ends ([`release`], after every GDAL dataset of the
//! job is closed). GDAL's connections then attach to the same read-only shared-memory index
//! (so they write nothing to `-shm`), see the rows the log holds, and are never the last
//! connection: none checkpoints. The job's own connection is read-only, so its close
//! checkpoints nothing either. Measured: the database, its `-wal` and its `-shm` keep every
//! byte, and the rows that live only in the log are read.
//!
//! A log without its `-shm` (copied without it) cannot be read that way (SQLite would create
//! the index): such an input is refused, naming the fix (checkpoint it with the program that
//! wrote it).

use crate::gdal::GdalError;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

thread_local! {
    /// The connections the job on this thread holds open, by database path.
    static HELD: RefCell<Vec<(PathBuf, rusqlite::Connection)>> = const { RefCell::new(Vec::new()) };
}

/// `path` with `suffix` appended to its file name (`x.gpkg` -> `x.gpkg-wal`).
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// A SQLite URI naming `path` read-only with a read-only shared-memory index: every byte
/// outside the unreserved set is percent-encoded (`?`, `#` and `%` would end or change the
/// path).
fn read_only_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/._-~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?mode=ro&readonly_shm=1");
    uri
}

/// Before GDAL opens the SQLite database at `path`: when a write-ahead log is beside it, hold
/// a read-only connection with a read-only `-shm` open until the job ends, so that GDAL reads
/// the log's rows and writes nothing (module doc). A log without its `-shm` is refused.
/// Nothing to do without a log, or when the job already holds this database.
pub fn hold(path: &Path) -> Result<(), GdalError> {
    let wal = beside(path, "-wal");
    let Ok(log) = std::fs::symlink_metadata(&wal) else {
        return Ok(());
    };
    if HELD.with(|h| h.borrow().iter().any(|(held, _)| held == path)) {
        return Ok(());
    }
    let refuse = |why: String| {
        GdalError::Arguments(format!(
            "{}: it is a SQLite database in write-ahead-log mode ({}, {} bytes, holds changes \
             that may not be in the database file yet) and {why}; GDAL 3.6 would write the log \
             into the database and delete it when it closes the file, and the server does not \
             write its inputs. Checkpoint the database with the program that wrote it (or \
             `sqlite3 {} \"PRAGMA wal_checkpoint(TRUNCATE)\"`), then try again",
            path.display(),
            wal.display(),
            log.len(),
            path.display()
        ))
    };
    let shm = beside(path, "-shm");
    if !std::fs::symlink_metadata(&shm).is_ok_and(|m| m.is_file()) {
        return Err(refuse(format!(
            "its shared-memory index {} is missing, so it cannot be read without creating one",
            shm.display()
        )));
    }
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_PRIVATE_CACHE;
    let held =
        rusqlite::Connection::open_with_flags(read_only_uri(path), flags).and_then(|connection| {
            connection.busy_timeout(std::time::Duration::from_millis(0))?;
            connection.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
                false,
            )?;
            connection
                .set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
            // A read attaches the log and the index: from here on this connection holds the
            // database's shared lock.
            connection.query_row("SELECT count(*) FROM main.sqlite_master", [], |row| {
                row.get::<_, i64>(0)
            })?;
            Ok(connection)
        });
    match held {
        Ok(connection) => {
            HELD.with(|h| h.borrow_mut().push((path.to_path_buf(), connection)));
            Ok(())
        }
        Err(e) => Err(refuse(format!(
            "it cannot be opened read-only with its log ({e})"
        ))),
    }
}

/// Close the connections the job on this thread holds (at the end of the job, after its
/// datasets are closed).
pub fn release() {
    HELD.with(|h| h.borrow_mut().clear());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_escapes_what_would_end_or_change_the_path() {
        assert_eq!(
            read_only_uri(Path::new("/w/a b?c#d%e.gpkg")),
            "file:/w/a%20b%3Fc%23d%25e.gpkg?mode=ro&readonly_shm=1"
        );
    }
}
