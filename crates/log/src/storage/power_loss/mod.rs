//! [`PowerLoss`]: a [`Storage`] that keeps a record of what each fsync made
//! durable, and can lose power.
//!
//! The real file system under it stands for the page cache: every call
//! changes the real files, so the log reads, maps and `sendfile`s them as
//! usual. Beside that, each file has a shadow: its durable bytes (as of its
//! last successful sync) and the changes made since, in order; each
//! directory change (a create, rename or removal) is logged with whether
//! an fsync of its directory has made it durable yet. No real fsync is
//! issued: durability is what the shadow says.
//!
//! [`PowerLoss::cut`] turns the power off: from then on every call fails,
//! as a dead machine's would. [`PowerLoss::restore`] then rebuilds the
//! directory as the machine would find it on the next boot, and takes that
//! as the new durable state, so the log can be opened on it and the power
//! cut again. What a crash keeps (the model; everything it leaves to chance
//! is drawn from the seed, so a seed and a history give one image):
//! - of a file's data, what its last sync covered, then a first run of the
//!   changes made after it, in order, the next one possibly torn: either a
//!   prefix of its bytes, or its whole length with zeros after the tear
//!   (the size reached the disk before the data);
//! - of a file written through a map, each page as it was at the last sync
//!   or as it is now, chosen page by page (write-back is in no order);
//! - of the directory changes (creates, renames, removals, one per entry),
//!   every one up to the last that an fsync of its directory made durable
//!   (the journal commits them in order), then a first run of the rest; an
//!   entry whose parent directory did not survive is lost with it;
//! - a sync that fails drops the file's unsynced changes for good, as
//!   Linux marks the pages clean after a write-back error, so that a later
//!   sync succeeding proves nothing about them ([`PowerLoss::fail_syncs`]).
//!
//! Paths are compared as given: the log must be opened on the same spelling
//! of the root directory the storage was made with.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use memmap2::MmapMut;

use super::{OpenMode, Os, Storage};

mod image;

use image::{Draw, apply, crash_content, surviving_names};

type FileId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File(FileId),
    Dir,
}

#[derive(Debug)]
enum Change {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Shadow {
    durable: Vec<u8>,
    /// Changes since the last successful sync, in order.
    pending: Vec<Change>,
    /// Written through a map: its pages change without calls here.
    mapped: bool,
    /// Where the file is now, while it has a name.
    path: Option<PathBuf>,
}

#[derive(Debug)]
enum NameChange {
    Link(PathBuf, Node),
    /// Removes the entry and, for a directory, everything under it.
    Unlink(PathBuf),
    Rename(PathBuf, PathBuf),
}

#[derive(Debug)]
struct Logged {
    change: NameChange,
    /// The directory whose fsync makes the change durable.
    dir: PathBuf,
    durable: bool,
}

#[derive(Debug, Default)]
struct State {
    off: bool,
    /// The namespace as of the last restore (or creation): all durable.
    base: BTreeMap<PathBuf, Node>,
    names: Vec<Logged>,
    /// (device, inode) of each live file.
    live: HashMap<(u64, u64), FileId>,
    files: HashMap<FileId, Shadow>,
    next_id: FileId,
    syncs: u64,
    failing_syncs: u32,
    /// Calls left before the power goes off by itself, if set.
    calls_left: Option<u64>,
}

/// What [`PowerLoss::restore`] did to the files.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Files the crash image holds.
    pub files: usize,
    /// Files whose last kept change was torn.
    pub torn: usize,
    /// Bytes of unsynced changes not kept.
    pub changes_lost: usize,
    /// Directory changes not kept.
    pub names_lost: usize,
}

/// The OS file system with a record of durability, and a power switch.
#[derive(Debug)]
pub struct PowerLoss {
    root: PathBuf,
    state: Mutex<State>,
}

fn powered_off() -> io::Error {
    io::Error::other("the power is off")
}

fn sync_failed() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

/// Every byte of the file, read by position (the cursor is not the log's).
fn read_whole(file: &File) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
    let mut bytes = vec![0; len];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

fn identity(file: &File) -> io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

fn parent(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl State {
    /// Fails once the power is off; counts the call towards a cut set by
    /// [`PowerLoss::cut_after`], which turns it off in place of the call.
    fn check_on(&mut self) -> io::Result<()> {
        if let Some(left) = self.calls_left.as_mut() {
            if *left == 0 {
                self.off = true;
                self.calls_left = None;
            } else {
                *left -= 1;
            }
        }
        if self.off { Err(powered_off()) } else { Ok(()) }
    }

    fn new_file(&mut self, key: (u64, u64), path: &Path, durable: Vec<u8>) -> FileId {
        let id = self.next_id;
        self.next_id += 1;
        self.live.insert(key, id);
        self.files.insert(
            id,
            Shadow {
                durable,
                path: Some(path.to_path_buf()),
                ..Shadow::default()
            },
        );
        id
    }

    /// The shadow of a file opened through the storage. A handle it never
    /// saw means the log changed a file behind its back: an error, never
    /// a guess.
    fn shadow(&mut self, file: &File) -> io::Result<&mut Shadow> {
        let key = identity(file)?;
        let id = *self.live.get(&key).ok_or_else(|| {
            io::Error::other("a file the power-loss storage did not open (a change bypassed it)")
        })?;
        Ok(self
            .files
            .get_mut(&id)
            .expect("every live file has a shadow"))
    }

    fn log(&mut self, change: NameChange, dir: PathBuf) {
        self.names.push(Logged {
            change,
            dir,
            durable: false,
        });
    }

    /// The files at and under `path` lose their name. Their identities
    /// and shadows stay: a handle still open may write and sync them, and
    /// an unsynced removal may not survive. (A new file on a reused inode
    /// takes the identity over in `new_file`.)
    fn unname(&mut self, path: &Path) {
        for shadow in self.files.values_mut() {
            if shadow.path.as_deref().is_some_and(|p| p.starts_with(path)) {
                shadow.path = None;
            }
        }
    }
}

impl PowerLoss {
    /// Takes everything under `root` (created if missing) as durable, and
    /// records from here on.
    pub fn new(root: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let storage = Self {
            root: root.to_path_buf(),
            state: Mutex::new(State::default()),
        };
        storage.baseline()?;
        Ok(storage)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rebuilds the state from the files under the root, all durable.
    fn baseline(&self) -> io::Result<()> {
        let (next_id, syncs) = {
            let old = self.lock();
            (old.next_id, old.syncs)
        };
        let mut state = State {
            next_id,
            syncs,
            ..State::default()
        };
        let mut pending = vec![self.root.clone()];
        state.base.insert(self.root.clone(), Node::Dir);
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                let meta = std::fs::symlink_metadata(&path)?;
                if meta.is_dir() {
                    state.base.insert(path.clone(), Node::Dir);
                    pending.push(path);
                } else {
                    let bytes = std::fs::read(&path)?;
                    let id = state.new_file((meta.dev(), meta.ino()), &path, bytes);
                    state.base.insert(path, Node::File(id));
                }
            }
        }
        *self.lock() = state;
        Ok(())
    }

    /// Turns the power off: every call fails from now on, until
    /// [`restore`](Self::restore).
    pub fn cut(&self) {
        self.lock().off = true;
    }

    /// Turns the power off in place of the `calls`-th call from now (0:
    /// the next), whatever thread makes it: a crash in the middle of
    /// whatever the log was doing.
    pub fn cut_after(&self, calls: u64) {
        self.lock().calls_left = Some(calls);
    }

    /// Whether the power is off.
    pub fn is_off(&self) -> bool {
        self.lock().off
    }

    /// Successful file syncs so far.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// Makes the next `count` file syncs fail with EIO, each dropping the
    /// file's unsynced changes.
    pub fn fail_syncs(&self, count: u32) {
        self.lock().failing_syncs = count;
    }

    /// After [`cut`](Self::cut): replaces the directory with what a crash
    /// at that moment could have left (drawn from `seed`), takes it as
    /// durable, and turns the power back on. Every handle opened before the
    /// cut must be dropped first: a thread still using one would change
    /// the new image once the power is back.
    pub fn restore(&self, seed: u64) -> io::Result<Restored> {
        let mut draw = Draw(seed);
        let (names, contents, report) = {
            let mut state = self.lock();
            if !state.off {
                return Err(io::Error::other("restore needs the power cut first"));
            }
            let (names, names_lost) = surviving_names(&state, &mut draw);
            let mut report = Restored {
                names_lost,
                ..Restored::default()
            };
            let mut contents = HashMap::new();
            for node in names.values() {
                if let Node::File(id) = *node
                    && !contents.contains_key(&id)
                {
                    let shadow = state.files.get_mut(&id).expect("named files have shadows");
                    contents.insert(id, crash_content(shadow, &mut draw, &mut report)?);
                }
            }
            report.files = contents.len();
            (names, contents, report)
        };
        std::fs::remove_dir_all(&self.root)?;
        for (path, node) in &names {
            match node {
                Node::Dir => std::fs::create_dir_all(path)?,
                Node::File(id) => std::fs::write(path, &contents[id])?,
            }
        }
        self.baseline()?;
        Ok(report)
    }
}

impl Storage for PowerLoss {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
        let mut state = self.lock();
        state.check_on()?;
        let existed = std::fs::symlink_metadata(path).is_ok();
        let file = Os.open(path, mode)?;
        let key = identity(&file)?;
        if existed {
            if !state.live.contains_key(&key) {
                return Err(io::Error::other(format!(
                    "{} was not created through the power-loss storage",
                    path.display()
                )));
            }
            let shadow = state.shadow(&file)?;
            if mode == OpenMode::Truncate {
                shadow.pending.push(Change::SetLen(0));
            }
        } else {
            let id = state.new_file(key, path, Vec::new());
            state.log(
                NameChange::Link(path.to_path_buf(), Node::File(id)),
                parent(path),
            );
        }
        Ok(file)
    }

    fn write_at(&self, file: &File, slices: &mut [IoSlice<'_>], offset: u64) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        let bytes = slices.iter().flat_map(|s| s.iter().copied()).collect();
        Os.write_at(file, slices, offset)?;
        state
            .shadow(file)?
            .pending
            .push(Change::Write { offset, bytes });
        Ok(())
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        Os.set_len(file, len)?;
        state.shadow(file)?.pending.push(Change::SetLen(len));
        Ok(())
    }

    fn allocate(&self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        Os.allocate(file, offset, len)?;
        let size = file.metadata()?.len();
        state.shadow(file)?.pending.push(Change::SetLen(size));
        Ok(())
    }

    /// What was written before the call is durable when it returns.
    fn sync(&self, file: &File) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        if state.failing_syncs > 0 {
            state.failing_syncs -= 1;
            state.shadow(file)?.pending.clear();
            return Err(sync_failed());
        }
        let shadow = state.shadow(file)?;
        if shadow.mapped {
            shadow.durable = read_whole(file)?;
            shadow.pending.clear();
        } else {
            for change in std::mem::take(&mut shadow.pending) {
                apply(&mut shadow.durable, &change);
            }
        }
        state.syncs += 1;
        Ok(())
    }
    unsafe fn map_mut(&self, file: &File) -> io::Result<MmapMut> {
        let mut state = self.lock();
        state.check_on()?;
        state.shadow(file)?.mapped = true;
        // SAFETY: the caller's contract (Storage::map_mut).
        unsafe { Os.map_mut(file) }
    }

    /// The map shares the page cache with the file, so reading the file
    /// sees it: no msync is needed to take the snapshot.
    fn sync_map(&self, file: &File, _map: &MmapMut) -> io::Result<()> {
        self.sync(file)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        std::fs::metadata(dir)?;
        for logged in state.names.iter_mut().filter(|n| n.dir == dir) {
            logged.durable = true;
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        let missing: Vec<&Path> = dir.ancestors().take_while(|p| !p.exists()).collect();
        for path in missing.into_iter().rev() {
            match std::fs::create_dir(path) {
                Ok(()) => state.log(
                    NameChange::Link(path.to_path_buf(), Node::Dir),
                    parent(path),
                ),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        if std::fs::symlink_metadata(to).is_ok() {
            state.unname(to);
        }
        std::fs::rename(from, to)?;
        for shadow in state.files.values_mut() {
            if let Some(path) = &shadow.path
                && let Ok(rest) = path.strip_prefix(from)
            {
                shadow.path = Some(if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                });
            }
        }
        state.log(
            NameChange::Rename(from.to_path_buf(), to.to_path_buf()),
            parent(to),
        );
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        std::fs::remove_file(path)?;
        state.unname(path);
        state.log(NameChange::Unlink(path.to_path_buf()), parent(path));
        Ok(())
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.check_on()?;
        // One removal per entry, deepest first, as the real one unlinks
        // them: a crash may leave the directory half emptied.
        let mut entries = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(next) = pending.pop() {
            for entry in std::fs::read_dir(&next)? {
                let path = entry?.path();
                if std::fs::symlink_metadata(&path)?.is_dir() {
                    pending.push(path.clone());
                }
                entries.push(path);
            }
        }
        entries.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        entries.push(dir.to_path_buf());
        std::fs::remove_dir_all(dir)?;
        state.unname(dir);
        for path in entries {
            let in_dir = parent(&path);
            state.log(NameChange::Unlink(path), in_dir);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
