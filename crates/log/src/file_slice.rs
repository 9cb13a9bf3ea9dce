//! A byte range of a segment file: what a read returns and what the broker
//! hands to `sendfile`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::LogError;
use super::error::IoContext;

/// Whole record batches at `position..position + len` of a `.log` file.
///
/// The file handle is shared, so a slice stays readable even if retention
/// deletes the segment before it is sent (the inode lives until the last
/// handle closes).
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u64,
}

impl FileSlice {
    /// Copies the bytes into memory (the non-zero-copy path, for embedded
    /// readers and tests).
    pub fn read_to_vec(&self) -> Result<Vec<u8>, LogError> {
        let mut buf = Vec::new();
        self.read_onto(&mut buf)?;
        Ok(buf)
    }

    /// Reads the bytes onto the end of `out`: several slices land in one
    /// buffer without a copy each (a fetch's slices, read in turn).
    pub fn read_onto(&self, out: &mut Vec<u8>) -> Result<(), LogError> {
        let len = usize::try_from(self.len).map_err(|_| {
            LogError::io(
                "reading a file slice",
                std::io::Error::other("slice larger than memory"),
            )
        })?;
        let start = out.len();
        out.resize(start + len, 0);
        let read = self.file.read_exact_at(&mut out[start..], self.position);
        if read.is_err() {
            out.truncate(start);
        }
        read.context(|| format!("reading {} bytes at position {}", self.len, self.position))
    }
}
