//! Folder watches for the files GDAL opens by name after the checks: a VRT's sources.
//!
//! GDAL opens a VRT's sources lazily, at the first read, by name; the checks before the open
//! and the identity check after it compare device, inode and change time, and the kernel
//! stamps change times from a coarse clock, so a source swapped for a link to an outside file
//! and swapped back within one tick kept its identity while GDAL read the outside file.
//! Before a VRT's references are checked, every folder GDAL walks to reach each of them (from
//! the workspace root, or the document's folder, down to the file's own folder) gets an
//! `inotify` watch for the names it depends on there: the next component, the file's name and
//! its sidecars (`<name>.*`, `<stem>.*`). Any entry created, deleted or moved under one of those
//! names, a watched folder moved or deleted, or a lost event (queue overflow) from then on is a
//! change, whatever the clocks say: [`changed`] reports it before an output is committed or a
//! read answered (`policy::verify_listed_unchanged`), and the job fails with nothing written.
//! The watches belong to the job on this thread and end with it ([`release`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// The names a watched folder holds that the job depends on.
#[derive(Debug, Default)]
struct Wanted {
    folder: PathBuf,
    names: Vec<String>,
    prefixes: Vec<String>,
}

struct Watches {
    fd: OwnedFd,
    by_descriptor: HashMap<i32, Wanted>,
}

thread_local! {
    static WATCHES: RefCell<Option<Watches>> = const { RefCell::new(None) };
    /// Files the job itself puts in a watched folder (its committed outputs).
    static EXPECTED: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
    /// The job's own staging folders: what GDAL lists inside them is the job's output.
    static OWN: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
}

/// A staging folder of the job on this thread: files in it are the job's own writes, never
/// watched (attack round 23, R23-A9: an external overview being built beside a VRT was listed
/// by GDAL as the VRT's, and its own writes were reported as a swap).
pub fn own_folder(path: &Path) {
    OWN.with(|o| o.borrow_mut().push(path.to_path_buf()));
}

/// Whether `path` lies in a staging folder of the job on this thread ([`own_folder`]).
pub fn in_own_folder(path: &Path) -> bool {
    OWN.with(|o| o.borrow().iter().any(|folder| path.starts_with(folder)))
}

/// A file the job on this thread writes itself: changes to its name are not reported.
pub fn expect(path: &Path) {
    EXPECTED.with(|e| e.borrow_mut().push(path.to_path_buf()));
}

const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW;

/// Watch the folders GDAL walks to reach `path` (as GDAL would resolve it) for changes to the
/// names it walks through, to the file and to its sidecars. Folders outside every workspace in
/// `roots` (the operator's) are not watched. Call before the file's identity is checked.
pub fn watch_reference(path: &Path, roots: &[PathBuf]) -> std::io::Result<()> {
    let mut at = PathBuf::from("/");
    let components: Vec<Component> = path.components().collect();
    for (index, component) in components.iter().enumerate() {
        let last = index + 1 == components.len();
        match component {
            Component::RootDir | Component::Prefix(_) => at = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(name) => {
                let name = name.to_string_lossy().to_string();
                if roots.iter().any(|root| at.starts_with(root)) {
                    let mut prefixes = Vec::new();
                    if last {
                        prefixes.push(format!("{name}."));
                        if let Some(stem) = crate::gdal::stem_of(Path::new(&name)) {
                            prefixes.push(format!("{}.", stem.to_string_lossy()));
                        }
                    }
                    add(&at, name.clone(), prefixes)?;
                }
                at.push(&name);
                // Where the kernel really is now (a link inside a workspace is followed).
                if !last {
                    if let Ok(real) = std::fs::canonicalize(&at) {
                        at = real;
                    }
                }
            }
        }
    }
    Ok(())
}

fn add(folder: &Path, name: String, prefixes: Vec<String>) -> std::io::Result<()> {
    WATCHES.with(|w| {
        let mut w = w.borrow_mut();
        if w.is_none() {
            // SAFETY: plain syscall; the descriptor is owned at once.
            let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            *w = Some(Watches {
                // SAFETY: a fresh descriptor owned by nobody else.
                fd: unsafe { OwnedFd::from_raw_fd(fd) },
                by_descriptor: HashMap::new(),
            });
        }
        let Some(watches) = w.as_mut() else {
            return Err(std::io::Error::other("no inotify instance"));
        };
        let c = std::ffi::CString::new(folder.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::other("a NUL byte in a path"))?;
        // SAFETY: a live inotify descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(watches.fd.as_raw_fd(), c.as_ptr(), MASK) };
        if wd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let wanted = watches.by_descriptor.entry(wd).or_insert_with(|| Wanted {
            folder: folder.to_path_buf(),
            ..Wanted::default()
        });
        if !wanted.names.contains(&name) {
            wanted.names.push(name);
        }
        for prefix in prefixes {
            if !wanted.prefixes.contains(&prefix) {
                wanted.prefixes.push(prefix);
            }
        }
        Ok(())
    })
}

/// The first change seen under the watches of this job since they were set, if any (a path,
/// or a folder and what happened to it).
pub fn changed() -> Option<String> {
    WATCHES.with(|w| {
        let w = w.borrow();
        let watches = w.as_ref()?;
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            // SAFETY: a live descriptor and a buffer of the given length.
            let n = unsafe {
                libc::read(
                    watches.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            if n <= 0 {
                // EAGAIN: no (more) events. Any other error: nothing can be vouched for.
                let error = std::io::Error::last_os_error();
                return (n < 0 && error.kind() != std::io::ErrorKind::WouldBlock)
                    .then(|| format!("the watches of the input's folders failed ({error})"));
            }
            let n = usize::try_from(n).unwrap_or(0);
            let header = std::mem::size_of::<libc::inotify_event>();
            let mut offset = 0;
            while offset + header <= n {
                // SAFETY: the kernel wrote a whole event header at `offset`; read unaligned.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buffer[offset..].as_ptr().cast()) };
                let length = event.len as usize;
                let name_bytes = buffer
                    .get(offset + header..offset + header + length)
                    .unwrap_or_default();
                let name_end = name_bytes
                    .iter()
                    .position(|b| *b == 0)
                    .unwrap_or(name_bytes.len());
                let name = String::from_utf8_lossy(&name_bytes[..name_end]).to_string();
                offset += header + length;
                if event.mask & libc::IN_Q_OVERFLOW != 0 {
                    return Some("too many changes in the input's folders to follow".into());
                }
                let Some(wanted) = watches.by_descriptor.get(&event.wd) else {
                    continue;
                };
                if event.mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED) != 0
                {
                    return Some(format!("{} (moved or deleted)", wanted.folder.display()));
                }
                let relevant = (wanted.names.contains(&name)
                    || wanted.prefixes.iter().any(|p| name.starts_with(p.as_str())))
                    && !EXPECTED.with(|e| e.borrow().contains(&wanted.folder.join(&name)));
                if relevant {
                    return Some(wanted.folder.join(&name).display().to_string());
                }
            }
        }
    })
}

/// End the watches of the job on this thread.
pub fn release() {
    WATCHES.with(|w| *w.borrow_mut() = None);
    EXPECTED.with(|e| e.borrow_mut().clear());
    OWN.with(|o| o.borrow_mut().clear());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A swap of a watched name is seen whatever the clocks say; other names are not.
    #[test]
    fn a_swapped_name_is_seen_and_other_names_are_not() {
        let root = tempfile::tempdir().unwrap();
        let root_path = root.path().canonicalize().unwrap();
        std::fs::create_dir(root_path.join("sub")).unwrap();
        let source = root_path.join("sub/src.tif");
        std::fs::write(&source, "x").unwrap();
        watch_reference(&source, std::slice::from_ref(&root_path)).unwrap();
        assert_eq!(changed(), None);
        std::fs::write(root_path.join("sub/other.tif"), "y").unwrap();
        std::fs::write(root_path.join("unrelated.txt"), "y").unwrap();
        assert_eq!(changed(), None, "unrelated names are no change");
        // Swapped for a link and back: the same inode, maybe the same change time.
        let keep = root_path.join("keep.tif");
        std::fs::hard_link(&source, &keep).unwrap();
        let link = root_path.join("sub/tmp");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        std::fs::rename(&link, &source).unwrap();
        std::fs::rename(&keep, &source).unwrap();
        assert!(changed().is_some_and(|c| c.ends_with("src.tif")));
        release();
        // A sidecar, and a folder on the way.
        watch_reference(&source, std::slice::from_ref(&root_path)).unwrap();
        std::fs::write(root_path.join("sub/src.tif.ovr"), "o").unwrap();
        assert!(changed().is_some_and(|c| c.ends_with("src.tif.ovr")));
        release();
        watch_reference(&source, std::slice::from_ref(&root_path)).unwrap();
        std::fs::rename(root_path.join("sub"), root_path.join("moved")).unwrap();
        assert!(changed().is_some());
        release();
        assert_eq!(changed(), None, "released");
    }

    /// The case the identity check (device, inode, change time) cannot see where change times
    /// come from a coarse clock: a swap for a link and a swap back within one tick leave the
    /// identity as it was. The watch sees every swap, whatever the clock.
    #[test]
    fn every_swap_and_back_is_seen_whatever_the_clock() {
        use std::os::unix::fs::MetadataExt;
        let root = tempfile::tempdir().unwrap();
        let root_path = root.path().canonicalize().unwrap();
        let source = root_path.join("src.tif");
        std::fs::write(&source, "x").unwrap();
        let keep = root_path.join("keep.tif");
        std::fs::hard_link(&source, &keep).unwrap();
        let swap_and_back = || {
            let link = root_path.join("link.tmp");
            std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
            std::fs::rename(&link, &source).unwrap();
            let back = root_path.join("back.tmp");
            std::fs::hard_link(&keep, &back).unwrap();
            std::fs::rename(&back, &source).unwrap();
        };
        let identity = || {
            let meta = std::fs::metadata(&source).unwrap();
            (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
        };
        let mut unseen_by_identity = 0;
        for _ in 0..200 {
            swap_and_back();
            let before = identity();
            watch_reference(&source, std::slice::from_ref(&root_path)).unwrap();
            swap_and_back();
            if identity() == before {
                unseen_by_identity += 1;
            }
            assert!(changed().is_some(), "the watch saw the swap");
            release();
        }
        // How many the identity check alone would have missed depends on the kernel's clock
        // (coarse ticks: most; fine-grained change times: none); the watch saw them all.
        eprintln!("{unseen_by_identity} of 200 swaps kept the file's identity");
    }
}
