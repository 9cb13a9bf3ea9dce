//! Where `strata users add` reads a password from: `--password-file`, else
//! `STRATA_USER_PASSWORD`, else stdin (a terminal's echo turned off while
//! it is typed). Never from an argument, which `ps` shows to every user of
//! the machine; never printed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use crate::sasl::PASSWORD_BYTES_MAX;

/// The environment variable a password may come from.
pub const PASSWORD_ENV: &str = "STRATA_USER_PASSWORD";

/// The password: the first line of `file`, else [`PASSWORD_ENV`], else the
/// first line of stdin. Empty or oversized passwords are refused.
pub(super) fn read_password(file: Option<&Path>, prompt: &str) -> anyhow::Result<String> {
    let password = match file {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                anyhow::anyhow!("reading the password from {}: {e}", file.display())
            })?;
            first_line(&text).to_string()
        }
        None => match std::env::var(PASSWORD_ENV) {
            Ok(password) => password,
            Err(std::env::VarError::NotUnicode(_)) => {
                anyhow::bail!("{PASSWORD_ENV} is not valid UTF-8")
            }
            Err(std::env::VarError::NotPresent) => read_stdin(prompt)?,
        },
    };
    if password.is_empty() {
        anyhow::bail!(
            "the password is empty: give it in --password-file, {PASSWORD_ENV} or on stdin"
        );
    }
    if password.len() > PASSWORD_BYTES_MAX {
        anyhow::bail!("the password is longer than {PASSWORD_BYTES_MAX} bytes");
    }
    Ok(password)
}

fn first_line(text: &str) -> &str {
    let line = text.split('\n').next().unwrap_or("");
    line.strip_suffix('\r').unwrap_or(line)
}

/// One line of stdin; on a terminal, prompted on stderr and not echoed.
fn read_stdin(prompt: &str) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let mut line = String::new();
    if stdin.is_terminal() {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let echo = EchoOff::new()?;
        let read = stdin.lock().read_line(&mut line);
        drop(echo);
        eprintln!();
        read?;
    } else {
        stdin.lock().read_line(&mut line)?;
    }
    Ok(first_line(&line).to_string())
}

/// The terminal on stdin with echo off, restored on drop.
struct EchoOff {
    saved: libc::termios,
}

impl EchoOff {
    fn new() -> std::io::Result<Self> {
        let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr writes a whole termios into the pointer it is
        // given, which points to room for one.
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, termios.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: tcgetattr returned 0, so it initialized the struct.
        let saved = unsafe { termios.assume_init() };
        let mut quiet = saved;
        quiet.c_lflag &= !libc::ECHO;
        // SAFETY: `quiet` is a valid termios, read from this terminal.
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &quiet) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { saved })
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: `saved` is the terminal's own settings, read in `new`.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_line_is_the_password() {
        assert_eq!(first_line("secret\n"), "secret");
        assert_eq!(first_line("secret\r\nmore"), "secret");
        assert_eq!(first_line("secret"), "secret");
        assert_eq!(first_line(" spaced out \n"), " spaced out ");
        assert_eq!(first_line(""), "");
    }
}
