//! Every input of the checked-in fuzz corpus (`fuzz/corpus/<target>/`),
//! run through its target's checks (`fuzz/checks/<target>.rs`, the very
//! code the fuzz target runs), so that a regression on any input known to
//! the fuzzers, or captured from real clients, fails `make test` without
//! libFuzzer or a nightly toolchain.
//!
//! Every target has a corpus directory, and every corpus directory a
//! target: a target added without seeds, or seeds left behind by a
//! removed target, fail here.

use std::path::{Path, PathBuf};

macro_rules! targets {
    ($($name:ident => $path:literal),* $(,)?) => {
        $(
            #[path = $path]
            mod $name;
        )*

        /// Each target's name and checks.
        const TARGETS: &[(&str, fn(&[u8]))] = &[$((stringify!($name), $name::check)),*];
    };
}

targets!(
    consumer_assignment => "../../fuzz/checks/consumer_assignment.rs",
    consumer_subscription => "../../fuzz/checks/consumer_subscription.rs",
    control_record => "../../fuzz/checks/control_record.rs",
    group_offset_value => "../../fuzz/checks/group_offset_value.rs",
    handover_offsets => "../../fuzz/checks/handover_offsets.rs",
    index_lookup => "../../fuzz/checks/index_lookup.rs",
    outbox_codec => "../../fuzz/checks/outbox_codec.rs",
    record_batch => "../../fuzz/checks/record_batch.rs",
    request_body => "../../fuzz/checks/request_body.rs",
    request_frame => "../../fuzz/checks/request_frame.rs",
    retain_records => "../../fuzz/checks/retain_records.rs",
    segment_recovery => "../../fuzz/checks/segment_recovery.rs",
);

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    let targets: Vec<String> = names_in(&fuzz_dir().join("fuzz_targets"))
        .into_iter()
        .filter_map(|file| file.strip_suffix(".rs").map(str::to_owned))
        .collect();
    let corpora = names_in(&fuzz_dir().join("corpus"));
    let replayed: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(targets, corpora, "fuzz_targets/ against corpus/");
    assert_eq!(targets, replayed, "fuzz_targets/ against this file's list");
}

#[test]
fn every_corpus_input_passes_its_targets_checks() {
    let mut replayed = 0;
    for (target, check) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        let inputs = names_in(&dir);
        assert!(!inputs.is_empty(), "no corpus for {target}");
        for input in inputs {
            let path = dir.join(&input);
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(outcome.is_ok(), "{target} fails on {}", path.display());
            replayed += 1;
        }
    }
    eprintln!("{replayed} corpus inputs replayed");
}
