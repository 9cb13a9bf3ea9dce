//! The leader's assignment of an app's tasks to its instances: balanced,
//! sticky and cooperative (KIP-429's two steps, for tasks).
//!
//! - Balanced: with n tasks and m members, every member gets ⌊n/m⌋ or
//!   ⌈n/m⌉ tasks once the group has settled.
//! - Sticky: a member keeps the tasks it runs, up to its share; a task
//!   nobody runs (its owner failed or left) goes first to the member whose
//!   copy of its state read the task's changelogs furthest (a standby's:
//!   its restore reads the least), then to one holding its state on disk,
//!   else to the member with the most room (then the fewest tasks of the
//!   same processor, so a processor's tasks spread). Standbys stay with
//!   the copies they keep, and go where none is kept yet.
//! - Cooperative: a task that moves is never given to its new owner in the
//!   round that takes it from the old one. The old owner's assignment
//!   lacks it; the owner stops the task (committing it), then joins again,
//!   and the next round gives it out as a task nobody runs. Tasks that do
//!   not move keep running through both rounds.
//!
//! Safety does not rest on this: two instances running one task at once
//! are ruled out by the task's transactional id (the newer fences the
//! older). The two steps only keep a move from costing a fenced commit.

use std::collections::{BTreeMap, BTreeSet};

use super::TaskId;
use super::codec::MemberInfo;

/// Every member's tasks (members with none included).
pub(crate) fn assign(
    tasks: &BTreeSet<TaskId>,
    members: &BTreeMap<String, MemberInfo>,
) -> BTreeMap<String, BTreeSet<TaskId>> {
    let mut assigned: BTreeMap<String, BTreeSet<TaskId>> = members
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    if members.is_empty() {
        return assigned;
    }
    // Who runs what now. A task two members claim (one of them lost its
    // session unknowingly) stays with neither: both give it up, and the
    // next round gives it out.
    let mut owners: BTreeMap<&TaskId, Vec<&str>> = BTreeMap::new();
    for (member, info) in members {
        for task in info.owned.iter().filter(|t| tasks.contains(*t)) {
            owners.entry(task).or_default().push(member);
        }
    }
    let mut claims: BTreeMap<&str, Vec<&TaskId>> = BTreeMap::new();
    for (&task, claimers) in &owners {
        if let [member] = claimers[..] {
            claims.entry(member).or_default().push(task);
        }
    }
    // Shares: the members running the most get the larger ones, so the
    // fewest tasks move; then those holding the warmest copies of tasks
    // nobody runs, so those go where their restore reads the least.
    let mut warmest: BTreeMap<&str, usize> = BTreeMap::new();
    for task in tasks.iter().filter(|t| !owners.contains_key(t)) {
        let best = (members.iter())
            .filter(|(_, info)| info.copies.contains_key(task))
            .max_by_key(|(m, info)| (copy_reached(info, task), std::cmp::Reverse(*m)));
        if let Some((member, _)) = best {
            *warmest.entry(member.as_str()).or_default() += 1;
        }
    }
    let (base, extra) = (tasks.len() / members.len(), tasks.len() % members.len());
    let mut order: Vec<&String> = members.keys().collect();
    order.sort_by_key(|m| {
        let running = claims.get(m.as_str()).map_or(0, Vec::len);
        let warm = warmest.get(m.as_str()).copied().unwrap_or(0);
        (std::cmp::Reverse(running), std::cmp::Reverse(warm))
    });
    let share: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(rank, m)| (m.as_str(), base + usize::from(rank < extra)))
        .collect();
    for (member, owned) in &mut claims {
        // Kept by partition first, so what a member keeps of its tasks
        // mixes processors rather than keeping one processor whole.
        owned.sort_by_key(|t| (t.partition, &t.processor));
        let keep = share[member];
        let target = assigned.get_mut(*member).expect("every member is listed");
        target.extend(owned.iter().take(keep).map(|t| (*t).clone()));
    }
    // Tasks nobody runs. (Tasks an owner gives up wait for the next round.)
    for task in tasks.iter().filter(|t| !owners.contains_key(t)) {
        let room = |m: &str| share[m].saturating_sub(assigned[m].len());
        let same = |m: &str| {
            assigned[m]
                .iter()
                .filter(|t| t.processor == task.processor)
                .count()
        };
        let holder = members
            .iter()
            .filter(|(m, info)| info.stored.contains(task) && room(m) > 0)
            .max_by_key(|(m, info)| (copy_reached(info, task), std::cmp::Reverse(*m)))
            .map(|(m, _)| m.as_str());
        let chosen = holder.or_else(|| {
            members
                .keys()
                .map(String::as_str)
                .filter(|m| room(m) > 0)
                .max_by_key(|m| (room(m), std::cmp::Reverse(same(m))))
        });
        if let Some(member) = chosen {
            let member = member.to_string();
            assigned
                .get_mut(&member)
                .expect("every member is listed")
                .insert(task.clone());
        }
    }
    assigned
}

/// How far `member`'s copy of `task` read its changelogs; -1 for none
/// reported.
fn copy_reached(member: &MemberInfo, task: &TaskId) -> i64 {
    member.copies.get(task).copied().unwrap_or(-1)
}

/// Standby copies: each of `stateful` (tasks with state) on up to `copies`
/// members that do not run it (nor claim it), preferring members whose
/// copy read furthest (the one keeping it now), then those that hold its
/// state, then those with the fewest copies.
pub(crate) fn assign_standbys(
    stateful: &BTreeSet<TaskId>,
    copies: usize,
    active: &BTreeMap<String, BTreeSet<TaskId>>,
    members: &BTreeMap<String, MemberInfo>,
) -> BTreeMap<String, BTreeSet<TaskId>> {
    let mut standby: BTreeMap<String, BTreeSet<TaskId>> = members
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    if copies == 0 {
        return standby;
    }
    for task in stateful {
        let mut candidates: Vec<&String> = members
            .iter()
            .filter(|(m, info)| !active[*m].contains(task) && !info.owned.contains(task))
            .map(|(m, _)| m)
            .collect();
        candidates.sort_by_key(|m| {
            let info = &members[*m];
            let reached = std::cmp::Reverse(copy_reached(info, task));
            (reached, !info.stored.contains(task), standby[*m].len())
        });
        for member in candidates.into_iter().take(copies) {
            let member = member.clone();
            standby
                .get_mut(&member)
                .expect("every member is listed")
                .insert(task.clone());
        }
    }
    standby
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_tasks(processors: &[&str], partitions: i32) -> BTreeSet<TaskId> {
        processors
            .iter()
            .flat_map(|p| (0..partitions).map(move |n| TaskId::new(p, n)))
            .collect()
    }

    fn member(owned: &BTreeSet<TaskId>) -> MemberInfo {
        MemberInfo {
            owned: owned.clone(),
            ..MemberInfo::default()
        }
    }

    /// A member holding copies of `tasks`, read as far as given.
    fn holding(copies: &[(&str, i32, i64)]) -> MemberInfo {
        let mut info = MemberInfo::default();
        for (processor, partition, reached) in copies {
            let task = TaskId::new(processor, *partition);
            info.stored.insert(task.clone());
            info.copies.insert(task, *reached);
        }
        info
    }

    /// Rounds of a group whose members run exactly what they were given,
    /// until the assignment stops changing; returns it and the rounds.
    fn settle(
        tasks: &BTreeSet<TaskId>,
        mut members: BTreeMap<String, MemberInfo>,
    ) -> (BTreeMap<String, BTreeSet<TaskId>>, usize) {
        for round in 1..10 {
            let assigned = assign(tasks, &members);
            check_no_task_moves_in_one_round(&members, &assigned);
            let same = assigned.iter().all(|(m, a)| members[m].owned == *a);
            if same {
                return (assigned, round);
            }
            for (m, a) in &assigned {
                members.get_mut(m).unwrap().owned = a.clone();
            }
        }
        panic!("no settled assignment after 10 rounds");
    }

    fn check_no_task_moves_in_one_round(
        members: &BTreeMap<String, MemberInfo>,
        assigned: &BTreeMap<String, BTreeSet<TaskId>>,
    ) {
        let mut seen = BTreeSet::new();
        for (m, tasks) in assigned {
            for task in tasks {
                assert!(seen.insert(task.clone()), "{task:?} given twice");
                for (other, info) in members {
                    assert!(
                        other == m || !info.owned.contains(task),
                        "{task:?} given to {m} while {other} runs it"
                    );
                }
            }
        }
    }

    fn check_balanced(tasks: &BTreeSet<TaskId>, assigned: &BTreeMap<String, BTreeSet<TaskId>>) {
        let all: BTreeSet<TaskId> = assigned.values().flatten().cloned().collect();
        assert_eq!(&all, tasks, "every task is run");
        let sizes: Vec<usize> = assigned.values().map(BTreeSet::len).collect();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(max - min <= 1, "unbalanced: {sizes:?}");
    }

    #[test]
    fn a_first_assignment_spreads_each_processor() {
        let tasks = all_tasks(&["split", "count"], 6);
        let members = ["a", "b", "c"]
            .iter()
            .map(|m| (m.to_string(), MemberInfo::default()))
            .collect();
        let (assigned, rounds) = settle(&tasks, members);
        assert_eq!(rounds, 2, "the second round confirms the first");
        check_balanced(&tasks, &assigned);
        for tasks in assigned.values() {
            let splits = tasks.iter().filter(|t| t.processor == "split").count();
            assert_eq!(splits, 2, "{tasks:?}");
        }
    }

    #[test]
    fn a_new_member_takes_tasks_only_once_their_owner_gave_them_up() {
        let tasks = all_tasks(&["count"], 4);
        let members: BTreeMap<String, MemberInfo> = [
            ("a".to_string(), member(&tasks)),
            ("b".to_string(), MemberInfo::default()),
        ]
        .into();
        let first = assign(&tasks, &members);
        assert_eq!(first["a"].len(), 2, "a keeps its share");
        assert!(first["b"].is_empty(), "the moving tasks wait a round");
        let (assigned, _) = settle(&tasks, members);
        check_balanced(&tasks, &assigned);
    }

    #[test]
    fn a_task_goes_to_the_member_holding_its_state() {
        let tasks = all_tasks(&["count"], 2);
        let mut b = MemberInfo::default();
        b.stored.insert(TaskId::new("count", 0));
        let members = [
            ("a".to_string(), MemberInfo::default()),
            ("b".to_string(), b),
        ]
        .into();
        let assigned = assign(&tasks, &members);
        assert!(assigned["b"].contains(&TaskId::new("count", 0)));
    }

    #[test]
    fn a_failed_task_goes_to_the_member_whose_copy_read_furthest() {
        // c's copy of count/0 is the warm one; b's was left on disk long
        // ago (a stale state, or a copy that stopped).
        let tasks = all_tasks(&["count"], 2);
        let members = [
            ("a".to_string(), MemberInfo::default()),
            ("b".to_string(), holding(&[("count", 0, 10)])),
            ("c".to_string(), holding(&[("count", 0, 9_000)])),
        ]
        .into();
        let assigned = assign(&tasks, &members);
        assert!(
            assigned["c"].contains(&TaskId::new("count", 0)),
            "{assigned:?}"
        );
    }

    #[test]
    fn standbys_stay_with_the_copies_kept_and_missing_ones_are_placed() {
        let tasks = all_tasks(&["count"], 3);
        let owned = |n: i32| member(&[TaskId::new("count", n)].into());
        // Each runs one task; a keeps count/1's copy, c count/0's.
        let mut members: BTreeMap<String, MemberInfo> =
            [("a", owned(0)), ("b", owned(1)), ("c", owned(2))]
                .map(|(m, info)| (m.to_string(), info))
                .into();
        members
            .get_mut("a")
            .unwrap()
            .copies
            .insert(TaskId::new("count", 1), 500);
        members
            .get_mut("c")
            .unwrap()
            .copies
            .insert(TaskId::new("count", 0), 700);
        let active = assign(&tasks, &members);
        for _ in 0..3 {
            let standby = assign_standbys(&tasks, 1, &active, &members);
            assert!(
                standby["a"].contains(&TaskId::new("count", 1)),
                "{standby:?}"
            );
            assert!(
                standby["c"].contains(&TaskId::new("count", 0)),
                "{standby:?}"
            );
            let placed = standby
                .iter()
                .filter(|(_, s)| s.contains(&TaskId::new("count", 2)));
            assert_eq!(placed.count(), 1, "the missing copy is placed");
        }
    }

    #[test]
    fn standbys_go_where_the_task_does_not_run_and_prefer_its_state() {
        let tasks = all_tasks(&["count"], 3);
        let mut c = MemberInfo::default();
        c.stored.insert(TaskId::new("count", 0));
        let members: BTreeMap<String, MemberInfo> = [
            ("a".to_string(), MemberInfo::default()),
            ("b".to_string(), MemberInfo::default()),
            ("c".to_string(), c),
        ]
        .into();
        let (active, _) = settle(&tasks, members.clone());
        let standby = assign_standbys(&tasks, 1, &active, &members);
        for task in &tasks {
            let holders: Vec<&String> = (standby.iter())
                .filter(|(_, s)| s.contains(task))
                .map(|(m, _)| m)
                .collect();
            assert_eq!(holders.len(), 1, "{task:?}: {holders:?}");
            assert!(
                !active[holders[0]].contains(task),
                "{task:?} runs where its copy is"
            );
        }
        let owner_of_0 = active
            .iter()
            .find(|(_, a)| a.contains(&TaskId::new("count", 0)));
        if owner_of_0.map(|(m, _)| m.as_str()) != Some("c") {
            assert!(standby["c"].contains(&TaskId::new("count", 0)));
        }
        assert!(
            assign_standbys(&tasks, 0, &active, &members)
                .values()
                .all(BTreeSet::is_empty)
        );
    }

    proptest! {
        /// From any start (members running any tasks, some claimed twice,
        /// some unknown), the group settles within three rounds on a
        /// balanced assignment of every task, never handing a task to a
        /// member while another runs it.
        #[test]
        fn any_group_settles_balanced_without_overlap(
            partitions in 1i32..9,
            members in 1usize..5,
            owned in proptest::collection::vec(proptest::collection::vec((0usize..2, 0i32..10), 0..8), 4),
        ) {
            let tasks = all_tasks(&["split", "count"], partitions);
            let names = ["split", "count"];
            let members: BTreeMap<String, MemberInfo> = (0..members)
                .map(|m| {
                    let owned = owned[m].iter().map(|(p, n)| TaskId::new(names[*p], *n)).collect();
                    (format!("m{m}"), member(&owned))
                })
                .collect();
            let (assigned, rounds) = settle(&tasks, members);
            check_balanced(&tasks, &assigned);
            prop_assert!(rounds <= 3, "{rounds} rounds");
        }

        /// A member that leaves costs the others none of their tasks.
        #[test]
        fn a_member_leaving_moves_only_its_tasks(partitions in 1i32..9, members in 2usize..5) {
            let tasks = all_tasks(&["split", "count"], partitions);
            let start = (0..members).map(|m| (format!("m{m}"), MemberInfo::default())).collect();
            let (settled, _) = settle(&tasks, start);
            let mut rest: BTreeMap<String, MemberInfo> =
                settled.iter().map(|(m, a)| (m.clone(), member(a))).collect();
            rest.remove("m0");
            let (after, _) = settle(&tasks, rest.clone());
            check_balanced(&tasks, &after);
            for (m, info) in &rest {
                let kept = info.owned.intersection(&after[m]).count();
                prop_assert!(kept == info.owned.len().min(after[m].len()), "{m} lost tasks it could keep");
            }
        }
    }
}
