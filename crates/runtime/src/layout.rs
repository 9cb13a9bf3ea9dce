//! Every path and lock of an app's state directory; nothing else in the
//! runtime builds a path.
//!
//! ```text
//! <data>/apps/<app>/                  a version's state directory (embedded;
//!                                     --state-dir when remote)
//!     versions.json                   the live version and the replayed ones
//!     .running                        locked while a process runs the version
//!     serving                         the address a running app serves on
//!     query-address                   the address a running app answers queries on
//!     group-member                    remote, a static member's view as it
//!                                     last joined the app's group
//!     tasks.json                      what each task of the running instance
//!                                     does now (see `board`), once a second
//!     <processor>/<partition>/        a task's RocksDB
//!     <processor>/<partition>.old     the replaced state during a swap
//!     <processor>/<partition>.restoring-<store>.sst
//!                                     a restored run about to be taken in
//!     checkpoints/REQUEST             a token: `checkpoint` asks running tasks
//!     checkpoints/<processor>/<partition>/<offset, 20 digits>/
//!                                     RocksDB checkpoints (built as
//!                                     `.partial`, an older one at the same
//!                                     offset moved to `.replaced`)
//!     checkpoints/<processor>/<partition>/ANSWERED
//!                                     the request token a task last answered
//!     rebuild/.lock                   held while a rebuild runs
//!     rebuild/<processor>/<partition>/                 a rebuild in progress
//!     rebuild/<processor>/<partition>.{ready,hold,caught-up,outcome}
//!                                     the handover files (see `task::handover`)
//!     versions/<name>/…               another version's state, laid out the same
//! ```
//!
//! Small files (`serving`, the handover files) are replaced whole: written
//! aside as `<name>.partial` and renamed, so a reader sees the old contents
//! or the new, never a part.
//!
//! Locks are `flock`s, released when their process exits however it ends:
//! a lock file left behind by a killed process is not held.

use std::path::{Path, PathBuf};

use strata_log::LogError;

/// What can go wrong with the files and locks of a state directory.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// Another process holds the lock; `why` says what holds it and what
    /// to do instead.
    #[error("{path} is locked: {why}")]
    Locked { path: PathBuf, why: String },
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
    #[error(transparent)]
    Log(#[from] LogError),
}

impl LayoutError {
    fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |error| Self::Io { context, error }
    }
}

/// The lock file of a version's running process.
const RUNNING: &str = ".running";
/// The file naming the address a running app serves the Kafka protocol on.
const SERVING: &str = "serving";
/// The address of the running app's query endpoint (`run --query`).
const QUERY_ADDRESS: &str = "query-address";
/// The address of the running app's console (`run --console`).
const CONSOLE_ADDRESS: &str = "console-address";
/// The address of a running rebuild's console (`rebuild --console`).
const REBUILD_CONSOLE_ADDRESS: &str = "rebuild-console-address";
/// The view a static member last joined its group with.
const GROUP_MEMBER: &str = "group-member";
/// The running instance's task board.
const TASK_BOARD: &str = "tasks.json";
/// The versions manifest, in the base state directory.
const MANIFEST: &str = "versions.json";
const VERSIONS: &str = "versions";
const CHECKPOINTS: &str = "checkpoints";
const REBUILD: &str = "rebuild";
/// The file in a task's checkpoint directory holding the request token it
/// last answered.
const ANSWERED: &str = "ANSWERED";

/// A lock held until dropped.
pub(crate) type Lock = nix::fcntl::Flock<std::fs::File>;

/// An app's state directory inside an embedded log's data directory (the
/// log ignores directories it did not make).
pub(crate) fn embedded_state_dir(data_dir: &Path, app: &str) -> PathBuf {
    data_dir.join("apps").join(app)
}

/// The versions manifest of an app whose base state is in `root`.
pub(crate) fn versions_manifest(root: &Path) -> PathBuf {
    root.join(MANIFEST)
}

/// The state directory of a replayed version.
pub(crate) fn version_dir(root: &Path, name: &str) -> PathBuf {
    root.join(VERSIONS).join(name)
}

/// The file naming the address the running app answers queries on.
pub(crate) fn query_address_file(state_dir: &Path) -> PathBuf {
    state_dir.join(QUERY_ADDRESS)
}

/// The file naming the address the running app's console answers on.
pub(crate) fn console_address_file(state_dir: &Path) -> PathBuf {
    state_dir.join(CONSOLE_ADDRESS)
}

/// The file naming the address a running rebuild's console answers on
/// (the app may serve its own console meanwhile).
pub(crate) fn rebuild_console_address_file(state_dir: &Path) -> PathBuf {
    state_dir.join(REBUILD_CONSOLE_ADDRESS)
}

/// The file naming the address the running app serves on.
pub(crate) fn serving_file(state_dir: &Path) -> PathBuf {
    state_dir.join(SERVING)
}

/// Where a static member keeps the view it last joined its group with.
pub(crate) fn group_member_file(state_dir: &Path) -> PathBuf {
    state_dir.join(GROUP_MEMBER)
}

/// The task board a running instance publishes.
pub(crate) fn task_board_file(state_dir: &Path) -> PathBuf {
    state_dir.join(TASK_BOARD)
}

/// The lock file of the process running a version.
pub(crate) fn running_lock(state_dir: &Path) -> PathBuf {
    state_dir.join(RUNNING)
}

/// The directory holding one processor's task directories.
pub(crate) fn processor_dir(state_dir: &Path, processor: &str) -> PathBuf {
    state_dir.join(processor)
}

/// A task's directory under `base`: `<base>/<processor>/<partition>` (its
/// live state under a version's state directory, its rebuild under
/// `rebuild`, its checkpoints under `checkpoints`).
pub(crate) fn task_dir(base: &Path, processor: &str, partition: i32) -> PathBuf {
    processor_dir(base, processor).join(partition.to_string())
}

/// Where a rebuild of one task of a version builds its state.
pub(crate) fn rebuild_dir(state_dir: &Path, processor: &str, partition: i32) -> PathBuf {
    task_dir(&state_dir.join(REBUILD), processor, partition)
}

/// The lock a running rebuild holds, in the version's `rebuild` directory.
pub(crate) fn rebuild_lock(state_dir: &Path) -> PathBuf {
    state_dir.join(REBUILD).join(".lock")
}

/// The state directory a rebuild directory belongs to.
pub(crate) fn state_dir_of_rebuild(rebuilt: &Path) -> &Path {
    rebuilt
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap_or(rebuilt)
}

/// `<dir><suffix>`: a file beside a directory (the handover files, the
/// replaced state of a swap).
pub(crate) fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    dir.with_file_name(name)
}

/// The table file a restore of `store` into the task state `dir` writes
/// before RocksDB takes it in (moved into the database then; one left by a
/// crash is rewritten by the next restore).
pub(crate) fn restore_table(dir: &Path, store: &str) -> PathBuf {
    beside(dir, &format!(".restoring-{store}.sst"))
}

/// Where a swap moves the live state while the rebuilt one takes its place.
pub(crate) fn replaced_state_dir(live: &Path) -> PathBuf {
    beside(live, ".old")
}

/// The directory of every task's checkpoints in a version.
pub(crate) fn checkpoints_root(state_dir: &Path) -> PathBuf {
    state_dir.join(CHECKPOINTS)
}

/// The file `checkpoint` writes (a fresh token) to ask a version's running
/// tasks for a checkpoint.
pub(crate) fn checkpoint_request(state_dir: &Path) -> PathBuf {
    checkpoints_root(state_dir).join("REQUEST")
}

/// Where the checkpoints of one task of a version are kept.
pub(crate) fn checkpoint_dir(state_dir: &Path, processor: &str, partition: i32) -> PathBuf {
    task_dir(&checkpoints_root(state_dir), processor, partition)
}

/// The file in a task's checkpoint directory with the request token the
/// task last answered.
pub(crate) fn checkpoint_answer(checkpoint_dir: &Path) -> PathBuf {
    checkpoint_dir.join(ANSWERED)
}

/// The paths of one checkpoint at `offset` in a task's checkpoint
/// directory: where it goes, where it is built, and where one already at
/// that offset is moved while it is replaced.
pub(crate) struct CheckpointPaths {
    pub target: PathBuf,
    pub building: PathBuf,
    pub replaced: PathBuf,
}

impl CheckpointPaths {
    pub fn new(dir: &Path, offset: i64) -> Self {
        let name = format!("{offset:020}");
        Self {
            target: dir.join(&name),
            building: dir.join(format!("{name}.partial")),
            replaced: dir.join(format!("{name}.replaced")),
        }
    }
}

/// A task's whole checkpoints in `dir`, oldest (lowest offset) first.
pub fn checkpoints(dir: &Path) -> std::io::Result<Vec<(i64, PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(offset) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i64>().ok())
        {
            found.push((offset, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// The task directories of one processor, by partition.
pub(crate) fn task_dirs(processor_dir: &Path) -> Result<Vec<(i32, PathBuf)>, LayoutError> {
    let entries = match std::fs::read_dir(processor_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(LayoutError::io(format!(
                "listing {}",
                processor_dir.display()
            ))(error));
        }
    };
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        if let Some(partition) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        {
            dirs.push((partition, entry.path()));
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// The files of `dir` (a checkpoint being copied into a rebuild), with
/// where each goes in `into`.
pub(crate) fn copied_files(dir: &Path, into: &Path) -> std::io::Result<Vec<(PathBuf, PathBuf)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        files.push((entry.path(), into.join(entry.file_name())));
    }
    Ok(files)
}

/// Whether `dir` holds a RocksDB database (its `CURRENT` file exists).
pub(crate) fn has_database(dir: &Path) -> bool {
    dir.join("CURRENT").exists()
}

/// Writes a small file whole: aside, then renamed into place.
pub(crate) fn write_whole(path: &Path, contents: &str) -> Result<(), LayoutError> {
    let partial = beside(path, ".partial");
    std::fs::write(&partial, contents)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(LayoutError::io(format!("writing {}", path.display())))
}

/// Holds `<state_dir>/.running` locked while the app runs: one process per
/// version's state at a time, and a way for other commands to tell.
pub(crate) fn lock_running(state_dir: &Path) -> Result<Lock, LayoutError> {
    lock_exclusive(&running_lock(state_dir), || {
        format!(
            "another process is running this app on {} (its state is in use); stop it first",
            state_dir.display()
        )
    })
}

/// Holds `<state>/rebuild/.lock` while a rebuild runs.
pub(crate) fn lock_rebuilds(state_dir: &Path) -> Result<Lock, LayoutError> {
    lock_exclusive(&rebuild_lock(state_dir), || {
        format!(
            "another rebuild of {} is running; wait for it to end",
            state_dir.display()
        )
    })
}

/// Locks `path` (created, with its directory, if missing) for this process
/// until the returned lock is dropped; `busy` says why not when another
/// holds it ([`LayoutError::Locked`]).
pub(crate) fn lock_exclusive(
    path: &Path,
    busy: impl FnOnce() -> String,
) -> Result<Lock, LayoutError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(LayoutError::io(format!("creating {}", dir.display())))?;
    }
    let file = std::fs::File::create(path)
        .map_err(LayoutError::io(format!("creating {}", path.display())))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        LayoutError::Locked {
            path: path.to_path_buf(),
            why: busy(),
        }
    })
}

/// Whether some process (this one included) holds `path` locked with
/// [`lock_exclusive`].
pub(crate) fn is_locked(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock).is_err()
}

/// Syncs the directory holding `path` (after a rename in it).
pub(crate) fn sync_parent(path: &Path) -> Result<(), LayoutError> {
    Ok(strata_log::storage::Disk::os().sync_dir(path.parent().unwrap_or(Path::new(".")))?)
}
