//! The crash image: what a power loss leaves of the recorded history (the
//! model is in the parent module's doc), drawn from a seed.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::{Change, NameChange, Node, Restored, Shadow, State, parent};

/// The granularity at which mapped writes reach the disk.
const PAGE_BYTES: usize = 4096;

/// A small seeded generator (SplitMix64): the crash image depends on
/// nothing but the seed and the history.
pub(super) struct Draw(pub(super) u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn up_to(&mut self, max: usize) -> usize {
        (self.next() % (max as u64 + 1)) as usize
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// The namespace after a crash: the base, every change up to the last one
/// made durable, and a first run of the rest. Returns it and how many
/// changes were lost.
pub(super) fn surviving_names(state: &State, draw: &mut Draw) -> (BTreeMap<PathBuf, Node>, usize) {
    // The journal commits directory changes in order: an fsync that makes
    // one durable makes every earlier one durable too.
    let durable = state
        .names
        .iter()
        .rposition(|n| n.durable)
        .map_or(0, |i| i + 1);
    let kept = durable + draw.up_to(state.names.len() - durable);
    let mut names = state.base.clone();
    for logged in &state.names[..kept] {
        let has_parent = |names: &BTreeMap<PathBuf, Node>, path: &Path| {
            names.get(&parent(path)) == Some(&Node::Dir)
        };
        match &logged.change {
            NameChange::Link(path, node) => {
                if has_parent(&names, path) {
                    names.insert(path.clone(), *node);
                }
            }
            NameChange::Unlink(path) => names.retain(|p, _| !p.starts_with(path)),
            NameChange::Rename(from, to) => {
                if names.contains_key(from) && has_parent(&names, to) {
                    names.retain(|p, _| !p.starts_with(to));
                    let moved: Vec<(PathBuf, Node)> = names
                        .iter()
                        .filter(|(p, _)| p.starts_with(from))
                        .map(|(p, n)| (p.clone(), *n))
                        .collect();
                    for (path, node) in moved {
                        names.remove(&path);
                        let rest = path.strip_prefix(from).expect("under from");
                        let target = if rest.as_os_str().is_empty() {
                            to.clone()
                        } else {
                            to.join(rest)
                        };
                        names.insert(target, node);
                    }
                }
            }
        }
    }
    (names, state.names.len() - kept)
}

/// A file's bytes after a crash: its durable bytes, a first run of its
/// changes, the next one possibly torn, and for a mapped file each page
/// new or old.
pub(super) fn crash_content(
    shadow: &Shadow,
    draw: &mut Draw,
    report: &mut Restored,
) -> io::Result<Vec<u8>> {
    let mut bytes = shadow.durable.clone();
    let kept = draw.up_to(shadow.pending.len());
    for change in &shadow.pending[..kept] {
        apply(&mut bytes, change);
    }
    if let Some(Change::Write {
        offset,
        bytes: data,
    }) = shadow.pending.get(kept)
    {
        let tear = draw.up_to(data.len());
        let torn: Vec<u8> = if draw.coin() {
            data[..tear].to_vec()
        } else {
            let mut zeroed = data.clone();
            zeroed[tear..].fill(0);
            zeroed
        };
        apply(
            &mut bytes,
            &Change::Write {
                offset: *offset,
                bytes: torn,
            },
        );
        report.torn += 1;
    }
    for change in &shadow.pending[kept..] {
        if let Change::Write { bytes, .. } = change {
            report.changes_lost += bytes.len();
        }
    }
    if shadow.mapped
        && let Some(path) = &shadow.path
    {
        let now = std::fs::read(path)?;
        for start in (0..bytes.len().min(now.len())).step_by(PAGE_BYTES) {
            let end = (start + PAGE_BYTES).min(bytes.len()).min(now.len());
            if draw.coin() {
                bytes[start..end].copy_from_slice(&now[start..end]);
            }
        }
    }
    Ok(bytes)
}

pub(super) fn apply(bytes: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Write {
            offset,
            bytes: data,
        } => {
            let start = *offset as usize;
            if bytes.len() < start + data.len() {
                bytes.resize(start + data.len(), 0);
            }
            bytes[start..start + data.len()].copy_from_slice(data);
        }
        Change::SetLen(len) => bytes.resize(*len as usize, 0),
    }
}
