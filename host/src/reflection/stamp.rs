//! A file's version, as the memos of the store and of lineage compare it: device, inode, size,
//! modification time and status-change time (to the nanosecond). The status-change time cannot
//! be set back by a process, so an edit that restores the modification time still changes the
//! stamp.

/// Device, inode, size, mtime (s, ns), ctime (s, ns).
pub type FileStamp = (u64, u64, u64, i64, i64, i64, i64);

/// The stamp of a file's metadata.
pub fn of(meta: &std::fs::Metadata) -> FileStamp {
    use std::os::unix::fs::MetadataExt;
    (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}
