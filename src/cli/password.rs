//! Where `strata users add` reads a password from: `--password-file`, else
//! `STRATA_USER_PASSWORD`, else stdin (on a terminal, prompted for and read
//! with echo off by rpassword). Never from an argument, which `ps` shows to
//! every user of the machine; never printed.

use std::io::{BufRead, IsTerminal};
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

/// One line of stdin; on a terminal, prompted and read by rpassword on the
/// terminal itself with echo off.
fn read_stdin(prompt: &str) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return rpassword::prompt_password(prompt).map_err(|e| {
            anyhow::anyhow!(
                "reading the password from the terminal: {e}; give it in --password-file or {PASSWORD_ENV} instead"
            )
        });
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| anyhow::anyhow!("reading the password from stdin: {e}"))?;
    Ok(first_line(&line).to_string())
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
