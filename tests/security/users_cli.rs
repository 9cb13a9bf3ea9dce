//! `strata users` as a user runs it: the binary editing a data directory,
//! and going through `strata serve` on a real socket; and confluent-kafka's
//! AdminClient (librdkafka) managing the same users through the broker.
//!
//! Every password set is then checked against the credentials file the way
//! the broker checks a SASL/PLAIN login ([`CredentialStore::verify_plain`]),
//! so a credential salted by librdkafka or by the CLI is proven usable, not
//! merely listed.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use strata::broker::auth::CredentialStore;
use support::ServerProcess;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// Runs `strata ARGS` with `stdin` and extra environment; returns its output.
fn strata(args: &[&str], stdin: &str, envs: &[(&str, &str)]) -> Output {
    let mut strata = Command::new(STRATA);
    strata
        .args(args)
        .env_remove("STRATA_USER_PASSWORD")
        .env_remove("STRATA_BOOTSTRAP")
        .envs(envs.iter().copied());
    support::process::run_with_input(&mut strata, stdin.as_bytes())
}

/// Runs `strata ARGS`, which must succeed; returns stdout and stderr.
fn ok(args: &[&str], stdin: &str, envs: &[(&str, &str)]) -> (String, String) {
    let output = strata(args, stdin, envs);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "strata {args:?} failed: {stderr}");
    (String::from_utf8(output.stdout).unwrap(), stderr)
}

/// Runs `strata ARGS`, which must fail; returns its stderr.
fn fails(args: &[&str]) -> String {
    let output = strata(args, "", &[]);
    assert!(!output.status.success(), "strata {args:?} succeeded");
    String::from_utf8(output.stderr).unwrap()
}

/// `strata users list --format json` plus `target` (`--data-dir D` or
/// `--bootstrap A`), as {user: [[mechanism, iterations]…]}.
fn listing(target: &[&str]) -> Value {
    let mut args = vec!["users", "list", "--format", "json"];
    args.extend_from_slice(target);
    let (out, _) = ok(&args, "", &[]);
    let users: Value = serde_json::from_str(&out).unwrap();
    let mut by_user = serde_json::Map::new();
    for user in users.as_array().unwrap() {
        let credentials: Vec<Value> = user["credentials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| json!([c["mechanism"], c["iterations"]]))
            .collect();
        by_user.insert(
            user["user"].as_str().unwrap().to_string(),
            json!(credentials),
        );
    }
    Value::Object(by_user)
}

fn verify(data_dir: &Path, user: &str, password: &str) -> bool {
    CredentialStore::open(data_dir)
        .unwrap()
        .verify_plain(user, password)
}

fn credentials_file(data_dir: &Path) -> PathBuf {
    data_dir.join("security/scram-credentials.json")
}

#[test]
fn users_are_added_listed_and_deleted_in_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let data_arg = data.to_str().unwrap();
    let password_file = dir.path().join("alice.pw");
    std::fs::write(&password_file, "alice-from-file\n").unwrap();

    ok(
        &[
            "users",
            "add",
            "alice",
            "--data-dir",
            data_arg,
            "--password-file",
            password_file.to_str().unwrap(),
        ],
        "",
        &[],
    );
    ok(
        &[
            "users",
            "add",
            "bob",
            "--mechanism",
            "SCRAM-SHA-256",
            "--iterations",
            "8192",
            "--data-dir",
            data_arg,
        ],
        "",
        &[("STRATA_USER_PASSWORD", "bob-from-env")],
    );
    let (out, said) = ok(
        &["users", "add", "carol", "--data-dir", data_arg],
        "carol-from-stdin\n",
        &[],
    );
    assert_eq!(out, "");
    assert!(said.contains("SCRAM-SHA-512 credential of carol"), "{said}");
    ok(
        &[
            "users",
            "add",
            "carol",
            "--mechanism",
            "SCRAM-SHA-256",
            "--data-dir",
            data_arg,
        ],
        "carol-from-stdin",
        &[],
    );

    assert_eq!(
        listing(&["--data-dir", data_arg]),
        json!({
            "alice": [["SCRAM-SHA-512", 4096]],
            "bob": [["SCRAM-SHA-256", 8192]],
            "carol": [["SCRAM-SHA-256", 4096], ["SCRAM-SHA-512", 4096]],
        })
    );
    assert!(verify(&data, "alice", "alice-from-file"));
    assert!(verify(&data, "bob", "bob-from-env"));
    assert!(verify(&data, "carol", "carol-from-stdin"));
    assert!(!verify(&data, "carol", "carol-from-stdin\n"));
    assert!(!verify(&data, "alice", "bob-from-env"));

    // Neither the listing nor the file holds a password.
    let (text, _) = ok(&["users", "list", "--data-dir", data_arg], "", &[]);
    assert!(text.starts_with("USER"), "{text}");
    assert_eq!(text.lines().count(), 5, "{text}");
    let file = std::fs::read_to_string(credentials_file(&data)).unwrap();
    for secret in ["alice-from-file", "bob-from-env", "carol-from-stdin"] {
        assert!(!text.contains(secret) && !file.contains(secret), "{secret}");
    }
    // What the file does hold (salts and keys) is the broker's user's alone.
    let dir = credentials_file(&data).parent().unwrap().to_path_buf();
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&dir).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700, "{} is {mode:o}", dir.display());

    ok(
        &[
            "users",
            "delete",
            "carol",
            "--mechanism",
            "SCRAM-SHA-256",
            "--data-dir",
            data_arg,
        ],
        "",
        &[],
    );
    ok(&["users", "delete", "bob", "--data-dir", data_arg], "", &[]);
    let gone = fails(&["users", "delete", "bob", "--data-dir", data_arg]);
    assert!(gone.contains("no user bob"), "{gone}");
    let no_mechanism = fails(&[
        "users",
        "delete",
        "carol",
        "--mechanism",
        "SCRAM-SHA-256",
        "--data-dir",
        data_arg,
    ]);
    assert!(
        no_mechanism.contains("no SCRAM-SHA-256 credential"),
        "{no_mechanism}"
    );
    // The file is still whole and valid after the deletes.
    let reopened = CredentialStore::open(&data).unwrap();
    let users: Vec<String> = reopened.list().into_iter().map(|u| u.user).collect();
    assert_eq!(users, ["alice", "carol"]);
    assert_eq!(
        listing(&["--data-dir", data_arg]),
        json!({"alice": [["SCRAM-SHA-512", 4096]], "carol": [["SCRAM-SHA-512", 4096]]})
    );
}

#[test]
fn bad_arguments_and_passwords_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let missing = dir.path().join("nope");
    let no_dir = fails(&["users", "list", "--data-dir", missing.to_str().unwrap()]);
    assert!(no_dir.contains("no data directory"), "{no_dir}");
    assert!(!missing.exists());

    let plain = fails(&[
        "users",
        "add",
        "a",
        "--mechanism",
        "PLAIN",
        "--data-dir",
        data,
    ]);
    assert!(plain.contains("SCRAM-SHA-512"), "{plain}");
    let output = strata(
        &[
            "users",
            "add",
            "a",
            "--iterations",
            "100",
            "--data-dir",
            data,
        ],
        "pw\n",
        &[],
    );
    let few = String::from_utf8(output.stderr).unwrap();
    assert!(few.contains("4096..=16384"), "{few}");
    let output = strata(&["users", "add", "a", "--data-dir", data], "\n", &[]);
    let empty = String::from_utf8(output.stderr).unwrap();
    assert!(
        !output.status.success() && empty.contains("password is empty"),
        "{empty}"
    );
    let unreadable = fails(&[
        "users",
        "add",
        "a",
        "--password-file",
        "/nonexistent/pw",
        "--data-dir",
        data,
    ]);
    assert!(unreadable.contains("/nonexistent/pw"), "{unreadable}");
    assert!(CredentialStore::open(dir.path()).unwrap().list().is_empty());
}

#[test]
fn users_are_managed_through_a_running_broker_and_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = ServerProcess::start(STRATA, &data);
    let broker = ["--bootstrap", server.addr.as_str()];
    let data_arg = data.to_str().unwrap();

    let mut add = vec!["users", "add", "dave", "--iterations", "8192"];
    add.extend_from_slice(&broker);
    ok(&add, "dave-pw\n", &[]);
    assert_eq!(listing(&broker), json!({"dave": [["SCRAM-SHA-512", 8192]]}));
    assert!(verify(&data, "dave", "dave-pw"));

    // Added in the data directory while the broker runs: the broker sees
    // it at once, and its own next change keeps it.
    ok(
        &["users", "add", "erin", "--data-dir", data_arg],
        "",
        &[("STRATA_USER_PASSWORD", "erin-pw")],
    );
    assert_eq!(
        listing(&broker),
        json!({"dave": [["SCRAM-SHA-512", 8192]], "erin": [["SCRAM-SHA-512", 4096]]})
    );
    let mut add = vec!["users", "add", "erin", "--mechanism", "SCRAM-SHA-256"];
    add.extend_from_slice(&broker);
    ok(&add, "erin-pw-256\n", &[]);
    assert_eq!(listing(&broker), listing(&["--data-dir", data_arg]));

    let mut delete = vec!["users", "delete", "erin"];
    delete.extend_from_slice(&broker);
    let (_, said) = ok(&delete, "", &[]);
    assert_eq!(said.matches("deleted").count(), 2, "{said}");
    let gone = fails(&delete);
    assert!(gone.contains("no user erin"), "{gone}");
    assert_eq!(
        listing(&["--data-dir", data_arg]),
        json!({"dave": [["SCRAM-SHA-512", 8192]]})
    );
    let (text, _) = ok(&[&["users", "list"][..], &broker].concat(), "", &[]);
    assert!(text.contains("dave") && !text.contains("dave-pw"), "{text}");
}

fn python() -> PathBuf {
    let venv = std::env::var_os("STRATA_COMPAT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/strata/compat/venv")
        });
    let python = venv.join("bin/python3");
    assert!(
        python.exists(),
        "no Python venv at {} (set STRATA_COMPAT_VENV): run `make deps` to install confluent-kafka",
        venv.display()
    );
    python
}

/// confluent-kafka's AdminClient against `addr`: sets carol's SCRAM-SHA-256
/// credential (8192 iterations, salted by librdkafka), deletes dave's
/// SCRAM-SHA-512 one, then describes every user and one unknown user.
const CONFLUENT_ADMIN: &str = r#"
import json, sys
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
    UserScramCredentialDeletion, UserScramCredentialUpsertion)

admin = AdminClient({"bootstrap.servers": sys.argv[1]})
changes = admin.alter_user_scram_credentials([
    UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                 b"carol-pw"),
    UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512),
])
for future in changes.values():
    future.result(timeout=30)

def listing(descriptions):
    return {user: [[info.mechanism.name.replace("_", "-"), info.iterations]
                   for info in sorted(d.scram_credential_infos, key=lambda i: i.mechanism)]
            for user, d in descriptions.items()}

everyone = admin.describe_user_scram_credentials().result(timeout=30)
named = {user: f.result(timeout=30)
         for user, f in admin.describe_user_scram_credentials(["carol"]).items()}
try:
    admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=30)
    unknown = None
except KafkaException as e:
    unknown = e.args[0].name()
print(json.dumps({"all": listing(everyone), "carol": listing(named), "unknown": unknown}))
"#;

#[test]
fn confluent_kafka_admin_client_manages_the_same_users() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = ServerProcess::start(STRATA, &data);
    let broker = ["--bootstrap", server.addr.as_str()];
    for (user, mechanism) in [
        ("alice", "SCRAM-SHA-512"),
        ("dave", "SCRAM-SHA-512"),
        ("dave", "SCRAM-SHA-256"),
    ] {
        let mut add = vec!["users", "add", user, "--mechanism", mechanism];
        add.extend_from_slice(&broker);
        ok(&add, &format!("{user}-pw\n"), &[]);
    }

    let output = Command::new(python())
        .args(["-c", CONFLUENT_ADMIN, &server.addr])
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "confluent-kafka failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    let expected = json!({
        "alice": [["SCRAM-SHA-512", 4096]],
        "carol": [["SCRAM-SHA-256", 8192]],
        "dave": [["SCRAM-SHA-256", 4096]],
    });
    assert_eq!(seen["all"], expected);
    assert_eq!(seen["carol"], json!({"carol": [["SCRAM-SHA-256", 8192]]}));
    assert_eq!(seen["unknown"], "RESOURCE_NOT_FOUND");
    // strata's own listing agrees, through the broker and in the file.
    assert_eq!(listing(&broker), expected);
    assert_eq!(listing(&["--data-dir", data.to_str().unwrap()]), expected);
    // librdkafka salted carol's password as strata does: it logs in.
    assert!(verify(&data, "carol", "carol-pw"));
    assert!(!verify(&data, "carol", "dave-pw"));
    assert!(verify(&data, "dave", "dave-pw"));
}
