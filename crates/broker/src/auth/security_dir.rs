//! `<data-dir>/security/`: where the SCRAM credentials and the ACLs live,
//! readable by the broker's user only (0700). A credential's stored and
//! server keys allow guessing its password offline, so the files under it
//! must not be readable by others whatever mode they were written with.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use strata_log::LogError;
use strata_log::storage::Disk;

/// The directory's name inside the data directory (no partition
/// directory can have this name: those end in `-<partition>`).
pub const SECURITY_DIR: &str = "security";

/// The directory's mode: the broker's user only.
const SECURITY_DIR_MODE: u32 = 0o700;

/// Creates `<data_dir>/security/` if it is missing (durably), and makes it
/// private to the broker's user either way; returns its path.
pub fn security_dir(disk: &Disk, data_dir: &Path) -> Result<PathBuf, LogError> {
    let dir = data_dir.join(SECURITY_DIR);
    if !dir.is_dir() {
        disk.create_dir_all(&dir)?;
        disk.sync_dir(data_dir)?;
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(SECURITY_DIR_MODE))
        .map_err(|error| LogError::io(format!("making {} private", dir.display()), error))?;
    Ok(dir)
}
