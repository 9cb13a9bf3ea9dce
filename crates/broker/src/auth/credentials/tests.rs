//! The credential store's tests: reopening, PLAIN against SCRAM keys,
//! changes by other processes, concurrent writers and corrupt files.

use super::*;

fn credential(mechanism: Mechanism, password: &str) -> ScramCredential {
    ScramCredential::derive(mechanism, password, b"salt", 4096).unwrap()
}

#[test]
fn credentials_survive_a_reopen_and_hold_no_password() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open(dir.path()).unwrap();
    assert!(store.list().is_empty());
    store
        .upsert(
            "alice",
            Mechanism::ScramSha512,
            credential(Mechanism::ScramSha512, "pw-alice"),
        )
        .unwrap();
    store
        .upsert(
            "a,b=c",
            Mechanism::ScramSha256,
            credential(Mechanism::ScramSha256, "pw-abc"),
        )
        .unwrap();
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert!(
        !text.contains("pw-alice") && !text.contains("pw-abc"),
        "{text}"
    );

    let reopened = CredentialStore::open(dir.path()).unwrap();
    assert_eq!(reopened.list(), store.list());
    assert_eq!(
        reopened.list()[1],
        UserCredentials {
            user: "alice".into(),
            mechanisms: vec![(Mechanism::ScramSha512, 4096)]
        }
    );
    assert_eq!(
        reopened.scram("alice", Mechanism::ScramSha512),
        Some(credential(Mechanism::ScramSha512, "pw-alice"))
    );
    assert_eq!(reopened.scram("alice", Mechanism::ScramSha256), None);
}

#[test]
fn plain_passwords_are_checked_against_the_strongest_scram_credential() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open(dir.path()).unwrap();
    store
        .upsert(
            "bob",
            Mechanism::ScramSha256,
            credential(Mechanism::ScramSha256, "old"),
        )
        .unwrap();
    assert!(store.verify_plain("bob", "old"));
    store
        .upsert(
            "bob",
            Mechanism::ScramSha512,
            credential(Mechanism::ScramSha512, "new"),
        )
        .unwrap();
    assert!(store.verify_plain("bob", "new"));
    assert!(!store.verify_plain("bob", "old"));
    assert!(!store.verify_plain("nobody", "new"));
    assert!(!store.verify_plain("bob", ""));
}

#[test]
fn a_change_by_another_process_is_seen_at_the_next_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let broker = CredentialStore::open(dir.path()).unwrap();
    assert_eq!(broker.scram("carol", Mechanism::ScramSha256), None);
    // Another process (a CLI) opens the same directory and adds a user.
    let cli = CredentialStore::open(dir.path()).unwrap();
    cli.upsert(
        "carol",
        Mechanism::ScramSha256,
        credential(Mechanism::ScramSha256, "c"),
    )
    .unwrap();
    assert!(broker.scram("carol", Mechanism::ScramSha256).is_some());
    // The broker's own change starts from the file, keeping carol.
    broker
        .upsert(
            "dave",
            Mechanism::ScramSha256,
            credential(Mechanism::ScramSha256, "d"),
        )
        .unwrap();
    assert_eq!(cli.list().len(), 2);
    assert_eq!(
        cli.delete("carol", None).unwrap(),
        vec![Mechanism::ScramSha256]
    );
    assert_eq!(broker.scram("carol", Mechanism::ScramSha256), None);
    assert_eq!(broker.list().len(), 1);
}

#[test]
fn concurrent_changes_from_many_threads_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let stored = credential(Mechanism::ScramSha256, "pw");
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let stored = stored.clone();
            let dir = dir.path();
            scope.spawn(move || {
                // A store each: as separate processes would, only the
                // flock keeps them apart.
                let store = CredentialStore::open(dir).unwrap();
                for i in 0..10 {
                    store
                        .upsert(
                            &format!("u{thread}-{i}"),
                            Mechanism::ScramSha256,
                            stored.clone(),
                        )
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(CredentialStore::open(dir.path()).unwrap().list().len(), 40);
}

#[test]
fn deleting_one_mechanism_keeps_the_other_and_the_last_removes_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open(dir.path()).unwrap();
    for mechanism in Mechanism::SCRAM {
        store
            .upsert("erin", mechanism, credential(mechanism, "pw"))
            .unwrap();
    }
    assert_eq!(
        store.delete("erin", Some(Mechanism::ScramSha256)).unwrap(),
        vec![Mechanism::ScramSha256]
    );
    assert_eq!(
        store.delete("erin", Some(Mechanism::ScramSha256)).unwrap(),
        vec![]
    );
    assert_eq!(
        store.list()[0].mechanisms,
        vec![(Mechanism::ScramSha512, 4096)]
    );
    assert_eq!(
        store.delete("erin", Some(Mechanism::ScramSha512)).unwrap(),
        vec![Mechanism::ScramSha512]
    );
    assert!(store.list().is_empty());
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert!(decode(store.path(), text.as_bytes()).unwrap().is_empty());
    assert!(CredentialStore::open(dir.path()).unwrap().list().is_empty());
}

#[test]
fn a_corrupt_file_fails_open_naming_it_and_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open(dir.path()).unwrap();
    store
        .upsert(
            "alice",
            Mechanism::ScramSha256,
            credential(Mechanism::ScramSha256, "pw"),
        )
        .unwrap();
    let good = std::fs::read_to_string(store.path()).unwrap();
    let bad_key = good.replacen("\"stored_key\": \"", "\"stored_key\": \"AAAA", 1);
    for damaged in [
        "{".to_string(),
        String::new(),
        good.replace("\"version\": 1", "\"version\": 9"),
        good.replace("SCRAM-SHA-256", "PLAIN"),
        good.replace("4096", "12"),
        bad_key,
        good.replacen("\"salt\": \"", "\"salt\": \"!", 1),
    ] {
        std::fs::write(store.path(), &damaged).unwrap();
        let error = CredentialStore::open(dir.path()).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, CredentialError::Corrupt { .. }),
            "{message}"
        );
        assert!(message.contains("scram-credentials.json"), "{message}");
        // The running store keeps what it had and refuses to write
        // over what it cannot read.
        assert!(store.scram("alice", Mechanism::ScramSha256).is_some());
        assert!(store.delete("alice", None).is_err());
        assert_eq!(std::fs::read_to_string(store.path()).unwrap(), damaged);
    }
}

#[test]
fn invalid_credentials_and_names_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open(dir.path()).unwrap();
    let sha256 = credential(Mechanism::ScramSha256, "pw");
    assert!(
        store
            .upsert("", Mechanism::ScramSha256, sha256.clone())
            .is_err()
    );
    assert!(
        store
            .upsert("x", Mechanism::ScramSha512, sha256.clone())
            .is_err()
    );
    assert!(store.upsert("x", Mechanism::Plain, sha256).is_err());
    assert!(!store.path().exists());
}
