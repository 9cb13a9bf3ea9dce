//! The group's own functions: what an assignment shows of an app's tasks.

use super::*;

#[test]
fn an_app_assignment_shows_its_tasks_and_other_assignments_none() {
    let data = TaskAssignment {
        error: String::new(),
        active: [TaskId::new("join", 2)].into(),
        standby: BTreeSet::new(),
    };
    let bytes =
        client::encode_assignment_with(&[("clicks".into(), 2)], Some(data.encode())).unwrap();
    assert_eq!(
        tasks_of_assignment(&bytes),
        Some(vec!["join/2".to_string()])
    );
    let plain = client::encode_assignment(&[("clicks".into(), 2)]).unwrap();
    assert_eq!(tasks_of_assignment(&plain), None);
}
