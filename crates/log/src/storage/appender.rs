//! [`Appender`]: a file written from its start through a [`Disk`], with
//! the writes gathered into large ones (the cleaner's output).

use std::fs::File;
use std::io;

use super::Disk;

/// Writes a file from its start through a [`Disk`], buffered: what the
/// cleaner uses to write a segment's cleaned copy.
pub(crate) struct Appender<'a> {
    disk: &'a Disk,
    file: File,
    written: u64,
    buf: Vec<u8>,
}

/// Bytes an [`Appender`] gathers before writing them.
const APPENDER_BUFFER_BYTES: usize = 1 << 20;

impl<'a> Appender<'a> {
    pub(crate) fn new(disk: &'a Disk, file: File) -> Self {
        Self {
            disk,
            file,
            written: 0,
            buf: Vec::with_capacity(APPENDER_BUFFER_BYTES),
        }
    }

    /// Writes what is buffered and returns the file (not synced).
    pub(crate) fn into_file(mut self) -> io::Result<File> {
        io::Write::flush(&mut self)?;
        Ok(self.file)
    }
}

impl io::Write for Appender<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len() + bytes.len() > APPENDER_BUFFER_BYTES {
            self.flush()?;
        }
        if bytes.len() >= APPENDER_BUFFER_BYTES {
            self.disk.write_at(&self.file, bytes, self.written)?;
            self.written += bytes.len() as u64;
        } else {
            self.buf.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.disk.write_at(&self.file, &self.buf, self.written)?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}
