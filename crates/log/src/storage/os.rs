//! [`Storage`] on the operating system's file system: each call is the
//! system call it names.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::path::Path;

use memmap2::MmapMut;

use super::{OpenMode, Storage};

/// The most iovecs one `pwritev` takes (Linux's IOV_MAX).
const IOVECS_PER_WRITE: usize = 1024;

/// The operating system's file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct Os;

impl Storage for Os {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        match mode {
            OpenMode::Existing => &mut options,
            OpenMode::Create => options.create(true).truncate(false),
            OpenMode::CreateNew => options.create_new(true),
            OpenMode::Truncate => options.create(true).truncate(true),
        }
        .open(path)
    }

    /// One `pwritev` per 1024 slices, short writes and interrupts retried.
    fn write_at(
        &self,
        file: &File,
        mut slices: &mut [IoSlice<'_>],
        mut offset: u64,
    ) -> io::Result<()> {
        while !slices.is_empty() {
            let chunk = slices.len().min(IOVECS_PER_WRITE);
            let at = i64::try_from(offset).map_err(io::Error::other)?;
            match nix::sys::uio::pwritev(file, &slices[..chunk], at) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => {
                    offset += written as u64;
                    IoSlice::advance_slices(&mut slices, written);
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
        Ok(())
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        file.set_len(len)
    }

    fn allocate(&self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        let start = i64::try_from(offset).map_err(io::Error::other)?;
        let len = i64::try_from(len).map_err(io::Error::other)?;
        nix::fcntl::posix_fallocate(file, start, len).map_err(io::Error::from)
    }

    fn sync(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }

    unsafe fn map_mut(&self, file: &File) -> io::Result<MmapMut> {
        // SAFETY: the caller's contract (Storage::map_mut).
        unsafe { MmapMut::map_mut(file) }
    }

    fn sync_map(&self, _file: &File, map: &MmapMut) -> io::Result<()> {
        map.flush()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(dir)
    }
}
