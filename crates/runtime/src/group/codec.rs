//! What an app's instances tell each other through the group, inside the
//! `consumer` protocol's subscription and assignment (so Kafka's tools and
//! `strata groups describe` read the topics and partitions as for any
//! consumer group), in their user data. Integers big-endian; a string is
//! an i16 length and UTF-8 bytes; a task list is an i32 count and, per
//! task, its processor's name (string) and its partition (i32).
//!
//! Subscription user data (version 0):
//!
//! | bytes | field |
//! |---|---|
//! | 2 | version (0) |
//! | list | owned: the tasks the instance runs now (stopping ones too) |
//! | list | stored: tasks whose state the instance holds on disk |
//! | string | query: the address its query endpoint answers on (`run --query`), empty when none; absent from older instances' data, which end before it |
//! | copies | per task copy held here (a standby's, one left on disk), how far it read the task's changelogs: an i32 count and, per copy, its task and an i64 (the sum over its stores of the changelog offsets reached); absent from older instances' data |
//!
//! Assignment user data (version 0):
//!
//! | bytes | field |
//! |---|---|
//! | 2 | version (0) |
//! | string | error: empty, or why the leader could not assign (every member stops with it) |
//! | list | active: the tasks the instance runs |
//! | list | standby: the tasks the instance keeps warm copies of |
//!
//! Decoding checks every length against the bytes left before it
//! allocates, and refuses a newer version with a message saying so.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::TaskId;

const VERSION: i16 = 0;
/// Longest processor name carried (a name longer than this is refused
/// when the app is declared long before it gets here).
const NAME_BYTES_MAX: usize = i16::MAX as usize;

/// A member's view, sent when it joins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MemberInfo {
    pub owned: BTreeSet<TaskId>,
    pub stored: BTreeSet<TaskId>,
    /// Where the instance answers queries (`host:port`), empty when it
    /// does not.
    pub query: String,
    /// Per copy of a task's state held here, how far it read the task's
    /// changelogs (summed over stores): the leader gives a task to the
    /// member whose copy is furthest along, and keeps standbys there.
    pub copies: BTreeMap<TaskId, i64>,
}

/// The leader's answer to one member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TaskAssignment {
    /// Non-empty when the group cannot run (inputs not co-partitioned).
    pub error: String,
    pub active: BTreeSet<TaskId>,
    pub standby: BTreeSet<TaskId>,
}

impl MemberInfo {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(VERSION);
        put_tasks(&mut buf, &self.owned);
        put_tasks(&mut buf, &self.stored);
        put_string(&mut buf, &self.query);
        buf.put_i32(self.copies.len() as i32);
        for (task, reached) in &self.copies {
            put_task(&mut buf, task);
            buf.put_i64(*reached);
        }
        buf.freeze()
    }

    pub fn decode(mut bytes: &[u8]) -> Result<Self, String> {
        version(&mut bytes, "subscription")?;
        let owned = tasks(&mut bytes)?;
        let stored = tasks(&mut bytes)?;
        // The query address came later: data that ends before it has none.
        let query = match bytes.is_empty() {
            true => String::new(),
            false => string(&mut bytes)?,
        };
        // So did the copies.
        let copies = match bytes.is_empty() {
            true => BTreeMap::new(),
            false => copies(&mut bytes)?,
        };
        Ok(Self {
            owned,
            stored,
            query,
            copies,
        })
    }
}

impl TaskAssignment {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(VERSION);
        put_string(&mut buf, &self.error);
        put_tasks(&mut buf, &self.active);
        put_tasks(&mut buf, &self.standby);
        buf.freeze()
    }

    pub fn decode(mut bytes: &[u8]) -> Result<Self, String> {
        version(&mut bytes, "assignment")?;
        let error = string(&mut bytes)?;
        let active = tasks(&mut bytes)?;
        let standby = tasks(&mut bytes)?;
        Ok(Self {
            error,
            active,
            standby,
        })
    }
}

fn version(bytes: &mut &[u8], what: &str) -> Result<(), String> {
    if bytes.remaining() < 2 {
        return Err(format!("an app {what} of {} bytes", bytes.len()));
    }
    match bytes.get_i16() {
        VERSION => Ok(()),
        v => Err(format!(
            "an app {what} of version {v}, newer than this instance's {VERSION}: upgrade it"
        )),
    }
}

fn put_string(buf: &mut BytesMut, text: &str) {
    let bytes = &text.as_bytes()[..text.len().min(NAME_BYTES_MAX)];
    buf.put_i16(bytes.len() as i16);
    buf.put_slice(bytes);
}

fn put_tasks(buf: &mut BytesMut, tasks: &BTreeSet<TaskId>) {
    buf.put_i32(tasks.len() as i32);
    for task in tasks {
        put_task(buf, task);
    }
}

fn put_task(buf: &mut BytesMut, task: &TaskId) {
    put_string(buf, &task.processor);
    buf.put_i32(task.partition);
}

fn copies(bytes: &mut &[u8]) -> Result<BTreeMap<TaskId, i64>, String> {
    if bytes.remaining() < 4 {
        return Err("a copy list cut short".into());
    }
    let count = bytes.get_i32();
    // Each copy takes at least 14 bytes: checked before anything is read.
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= bytes.remaining() / 14)
        .ok_or_else(|| {
            format!(
                "a copy list of {count} with {} bytes left",
                bytes.remaining()
            )
        })?;
    let mut copies = BTreeMap::new();
    for _ in 0..count {
        let processor = string(bytes)?;
        if bytes.remaining() < 12 {
            return Err("a copy cut short".into());
        }
        let partition = bytes.get_i32();
        let reached = bytes.get_i64();
        copies.insert(
            TaskId {
                processor,
                partition,
            },
            reached,
        );
    }
    Ok(copies)
}

fn string(bytes: &mut &[u8]) -> Result<String, String> {
    if bytes.remaining() < 2 {
        return Err("a string cut short".into());
    }
    let len = bytes.get_i16();
    let len = usize::try_from(len).map_err(|_| format!("a string of length {len}"))?;
    if bytes.remaining() < len {
        return Err(format!(
            "a string of {len} bytes with {} left",
            bytes.remaining()
        ));
    }
    let text = std::str::from_utf8(&bytes[..len])
        .map_err(|_| "a string that is not UTF-8".to_string())?
        .to_string();
    bytes.advance(len);
    Ok(text)
}

fn tasks(bytes: &mut &[u8]) -> Result<BTreeSet<TaskId>, String> {
    if bytes.remaining() < 4 {
        return Err("a task list cut short".into());
    }
    let count = bytes.get_i32();
    // Each task takes at least 6 bytes: checked before anything is read.
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= bytes.remaining() / 6)
        .ok_or_else(|| {
            format!(
                "a task list of {count} with {} bytes left",
                bytes.remaining()
            )
        })?;
    let mut tasks = BTreeSet::new();
    for _ in 0..count {
        let processor = string(bytes)?;
        if bytes.remaining() < 4 {
            return Err("a task cut short".into());
        }
        let partition = bytes.get_i32();
        tasks.insert(TaskId {
            processor,
            partition,
        });
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[(&str, i32)]) -> BTreeSet<TaskId> {
        list.iter().map(|(p, n)| TaskId::new(p, *n)).collect()
    }

    #[test]
    fn member_info_and_assignments_round_trip() {
        let info = MemberInfo {
            owned: ids(&[("split", 0), ("count", 3)]),
            stored: ids(&[("count", 1)]),
            query: "127.0.0.1:8080".into(),
            copies: [
                (TaskId::new("count", 1), 4_711),
                (TaskId::new("count", 2), 0),
            ]
            .into(),
        };
        assert_eq!(MemberInfo::decode(&info.encode()).unwrap(), info);
        let assignment = TaskAssignment {
            error: "no".into(),
            active: ids(&[("split", 2)]),
            standby: ids(&[("count", 0)]),
        };
        assert_eq!(
            TaskAssignment::decode(&assignment.encode()).unwrap(),
            assignment
        );
    }

    #[test]
    fn every_truncation_and_a_newer_version_are_refused() {
        let info = MemberInfo {
            owned: ids(&[("split", 0)]),
            stored: ids(&[("count", 1)]),
            query: "h:1".into(),
            copies: [(TaskId::new("count", 1), 9)].into(),
        };
        let bytes = info.encode();
        // Cut anywhere but where an older instance's data ends.
        let without_copies = bytes.len() - 4 - (2 + 5 + 4 + 8);
        let without_query = without_copies - 2 - info.query.len();
        for cut in (0..bytes.len()).filter(|&c| c != without_query && c != without_copies) {
            assert!(MemberInfo::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let no_copies = MemberInfo::decode(&bytes[..without_copies]).unwrap();
        assert_eq!(
            (no_copies.query, no_copies.copies),
            (info.query.clone(), BTreeMap::new())
        );
        let older = MemberInfo::decode(&bytes[..without_query]).unwrap();
        assert_eq!(
            (older.owned, older.query),
            (info.owned.clone(), String::new())
        );
        let mut newer = bytes.to_vec();
        newer[1] = 1;
        assert!(MemberInfo::decode(&newer).unwrap_err().contains("upgrade"));
    }

    #[test]
    fn a_count_larger_than_the_bytes_is_refused_before_allocating() {
        let mut buf = BytesMut::new();
        buf.put_i16(0);
        buf.put_i32(i32::MAX);
        assert!(MemberInfo::decode(&buf).is_err());
        let mut buf = BytesMut::new();
        buf.put_i16(0);
        buf.put_i32(-1);
        assert!(MemberInfo::decode(&buf).is_err());
    }
}
