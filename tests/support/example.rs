//! Example binaries for tests that run one as a real process, built in
//! the profile of the test itself.
//!
//! Cargo hands integration tests the paths of the package's binaries
//! (`CARGO_BIN_EXE_<name>`) but not of its examples, and
//! `cargo test --test <name>` alone does not build examples. So the test
//! builds the example it needs, with the profile and target directory it
//! was itself built with: a test built by `cargo test --release` runs a
//! release example and never compiles a debug build (a second RocksDB) in
//! the middle of the suite.
//!
//! A test built with `--config` settings (`make soak` builds strata
//! optimized inside the dev profile) names them in
//! `STRATA_EXAMPLE_CONFIG`, one per line or separated by spaces, so the
//! example is built the same way and shares the test's strata library.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The path of example `name`, built (or brought up to date) on the first
/// call in this process.
pub fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<BTreeMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    built
        .entry(name.to_string())
        .or_insert_with(|| build(name))
        .clone()
}

/// `target/<profile>`: a test binary lives in `target/<profile>/deps`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps")
        .to_path_buf()
}

fn build(name: &str) -> PathBuf {
    let test_profile_dir = profile_dir();
    // A test built with a separate build directory (`CARGO_BUILD_BUILD_DIR`)
    // runs from there; its binaries, and so its examples, belong in
    // `CARGO_TARGET_DIR`.
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => test_profile_dir
            .parent()
            .expect("target/<profile>")
            .to_path_buf(),
    };
    let profile_dir = target_dir.join(test_profile_dir.file_name().expect("a profile directory"));
    // The `dev` profile builds into `debug`; every other profile, `release`
    // included, into a directory of its own name.
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("no profile in {}", profile_dir.display()),
    };
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "--quiet", "--example", name, "--profile", profile]);
    let config = std::env::var("STRATA_EXAMPLE_CONFIG").unwrap_or_default();
    for setting in config.split_whitespace() {
        cargo.args(["--config", setting]);
    }
    let output = cargo
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "building example {name} (profile {profile}) failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(binary.exists(), "no example {name} at {}", binary.display());
    binary
}
