//! DescribeUserScramCredentials and AlterUserScramCredentials: SCRAM users
//! managed by admin clients (`kafka-configs --alter --add-config
//! SCRAM-SHA-512=…`, `AdminClient.alterUserScramCredentials`), in the
//! broker's [`CredentialStore`].
//!
//! Kafka's (KRaft's) semantics and messages: a user named twice in one
//! request fails with DUPLICATE_RESOURCE and nothing of it is changed; an
//! unknown user in a describe, or a deletion of a credential that does not
//! exist, is RESOURCE_NOT_FOUND; an empty name or iterations outside
//! 4096..=16384 are UNACCEPTABLE_CREDENTIAL; a mechanism other than
//! SCRAM-SHA-256/512 is UNSUPPORTED_SASL_MECHANISM. Each user has its own
//! result; the changes that pass are applied together in one write.
//!
//! The client salts the password itself: the request carries the salt and
//! the salted password, from which the broker derives StoredKey and
//! ServerKey and keeps only those.

use std::collections::HashMap;

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::auth::{CredentialError, CredentialStore, UserCredentials};
use strata_protocol::sasl::{ITERATIONS_MAX, ITERATIONS_MIN, Mechanism, ScramCredential};

const ALTERED_TWICE: &str = "A user credential cannot be altered twice in the same request";
const EMPTY_NAME: &str = "Username must not be empty";
const UNKNOWN_MECHANISM: &str = "Unknown SCRAM mechanism";
const NO_SUCH_CREDENTIAL: &str = "Attempt to delete a user credential that does not exist";

const NOT_AUTHORIZED: &str =
    "Not authorized to manage user credentials: needs the cluster's ALTER (DESCRIBE to list them)";

/// Needs DESCRIBE on the cluster, as Kafka asks: the list names every user.
pub(super) fn describe(
    ctx: &BrokerContext,
    request: &DescribeUserScramCredentialsRequest,
    caller: &Caller,
) -> DescribeUserScramCredentialsResponse {
    if !ctx
        .acls
        .authorize(caller, Operation::Describe, Resource::cluster())
    {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(NOT_AUTHORIZED)));
    }
    describe_in(&ctx.credentials, request)
}

/// Needs ALTER on the cluster, as Kafka asks: whoever may set a password
/// may log in as that user.
pub(super) fn alter(
    ctx: &BrokerContext,
    request: &AlterUserScramCredentialsRequest,
    caller: &Caller,
) -> AlterUserScramCredentialsResponse {
    if !ctx
        .acls
        .authorize(caller, Operation::Alter, Resource::cluster())
    {
        let users = request
            .upsertions
            .iter()
            .map(|u| u.name.as_str())
            .chain(request.deletions.iter().map(|d| d.name.as_str()));
        let refused = |user: &str| {
            altered(
                user,
                Err((
                    ErrorCode::ClusterAuthorizationFailed,
                    NOT_AUTHORIZED.to_string(),
                )),
            )
        };
        return AlterUserScramCredentialsResponse::default()
            .with_results(users.map(refused).collect());
    }
    alter_in(&ctx.credentials, request)
}

/// No user named (null or empty) describes every user.
fn describe_in(
    store: &CredentialStore,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let credentials = store.current();
    let named: Vec<&str> = request
        .users
        .iter()
        .flatten()
        .map(|user| user.name.as_str())
        .collect();
    let results = if named.is_empty() {
        credentials.list().iter().map(described).collect()
    } else {
        let mut times: HashMap<&str, usize> = HashMap::new();
        for user in &named {
            *times.entry(user).or_default() += 1;
        }
        let mut results = Vec::new();
        for user in named {
            // Once per user, where it was first named.
            let Some(count) = times.remove(user) else {
                continue;
            };
            let result = if count > 1 {
                failed_description(
                    user,
                    ErrorCode::DuplicateResource,
                    format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ),
                )
            } else {
                match credentials.describe(user) {
                    Some(found) => described(&found),
                    None => failed_description(
                        user,
                        ErrorCode::ResourceNotFound,
                        format!(
                            "Attempt to describe a user credential that does not exist: {user}"
                        ),
                    ),
                }
            };
            results.push(result);
        }
        results
    };
    DescribeUserScramCredentialsResponse::default()
        .with_error_code(ErrorCode::None.code())
        .with_results(results)
}

fn described(user: &UserCredentials) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.user.clone()))
        .with_error_code(ErrorCode::None.code())
        .with_credential_infos(
            user.mechanisms
                .iter()
                .filter_map(|(mechanism, iterations)| {
                    Some(
                        CredentialInfo::default()
                            .with_mechanism(mechanism.scram_type()?)
                            .with_iterations(i32::try_from(*iterations).ok()?),
                    )
                })
                .collect(),
        )
}

fn failed_description(
    user: &str,
    code: ErrorCode,
    message: String,
) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// What one user's part of an alteration comes to.
enum Outcome {
    Failed(ErrorCode, String),
    Delete(Mechanism),
    Upsert(Mechanism, ScramCredential),
}

fn alter_in(
    store: &CredentialStore,
    request: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Users in the order first named, each with the one change it asks
    // for, or why it fails.
    let mut order: Vec<String> = Vec::new();
    let mut outcomes: HashMap<String, Outcome> = HashMap::new();
    let named = (request.deletions.iter())
        .map(|deletion| (deletion.name.as_str(), validate_deletion(deletion)))
        .chain(
            (request.upsertions.iter())
                .map(|upsertion| (upsertion.name.as_str(), validate_upsertion(upsertion))),
        );
    for (user, outcome) in named {
        match outcomes.get_mut(user) {
            None => {
                order.push(user.to_string());
                outcomes.insert(user.to_string(), outcome);
            }
            Some(Outcome::Failed(..)) => {}
            Some(first) => {
                *first = Outcome::Failed(ErrorCode::DuplicateResource, ALTERED_TWICE.into());
            }
        }
    }
    let applied = store.modify(|credentials| {
        let mut applied: HashMap<String, Result<(), (ErrorCode, String)>> = HashMap::new();
        for (user, outcome) in &outcomes {
            let result = match outcome {
                Outcome::Failed(..) => continue,
                Outcome::Delete(mechanism) => {
                    if credentials.remove(user, *mechanism) {
                        Ok(())
                    } else {
                        Err((ErrorCode::ResourceNotFound, NO_SUCH_CREDENTIAL.to_string()))
                    }
                }
                Outcome::Upsert(mechanism, credential) => credentials
                    .insert(user, *mechanism, credential.clone())
                    .map_err(|error| match error {
                        CredentialError::TooManyUsers => {
                            (ErrorCode::PolicyViolation, error.to_string())
                        }
                        _ => (ErrorCode::UnacceptableCredential, error.to_string()),
                    }),
            };
            applied.insert(user.clone(), result);
        }
        applied
    });
    let results = order
        .iter()
        .map(|user| {
            let result = match (&outcomes[user], &applied) {
                (Outcome::Failed(code, message), _) => Err((*code, message.clone())),
                (_, Ok(applied)) => applied[user].clone(),
                (_, Err(error)) => {
                    tracing::error!(%error, "changing SCRAM credentials");
                    Err((ErrorCode::UnknownServerError, error.to_string()))
                }
            };
            if result.is_ok() {
                let change = match &outcomes[user] {
                    Outcome::Delete(mechanism) => format!("deleted {mechanism}"),
                    Outcome::Upsert(mechanism, _) => format!("set {mechanism}"),
                    Outcome::Failed(..) => unreachable!("a failed change is never applied"),
                };
                tracing::info!(user = %user, change = %change, "SCRAM credential altered");
            }
            altered(user, result)
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

fn altered(user: &str, result: Result<(), (ErrorCode, String)>) -> AlterUserScramCredentialsResult {
    let (code, message) = match result {
        Ok(()) => (ErrorCode::None, None),
        Err((code, message)) => (code, Some(StrBytes::from_string(message))),
    };
    AlterUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_error_code(code.code())
        .with_error_message(message)
}

fn validate_name_and_mechanism(name: &str, mechanism: i8) -> Result<Mechanism, Outcome> {
    if name.is_empty() {
        return Err(Outcome::Failed(
            ErrorCode::UnacceptableCredential,
            EMPTY_NAME.into(),
        ));
    }
    Mechanism::from_scram_type(mechanism).ok_or_else(|| {
        Outcome::Failed(
            ErrorCode::UnsupportedSaslMechanism,
            UNKNOWN_MECHANISM.into(),
        )
    })
}

fn validate_deletion(deletion: &ScramCredentialDeletion) -> Outcome {
    match validate_name_and_mechanism(deletion.name.as_str(), deletion.mechanism) {
        Ok(mechanism) => Outcome::Delete(mechanism),
        Err(failed) => failed,
    }
}

fn validate_upsertion(upsertion: &ScramCredentialUpsertion) -> Outcome {
    let mechanism = match validate_name_and_mechanism(upsertion.name.as_str(), upsertion.mechanism)
    {
        Ok(mechanism) => mechanism,
        Err(failed) => return failed,
    };
    let unacceptable =
        |message: String| Outcome::Failed(ErrorCode::UnacceptableCredential, message);
    let iterations = upsertion.iterations;
    if i64::from(iterations) < i64::from(ITERATIONS_MIN) {
        return unacceptable("Too few iterations".into());
    }
    if i64::from(iterations) > i64::from(ITERATIONS_MAX) {
        return unacceptable("Too many iterations".into());
    }
    let iterations = u32::try_from(iterations).expect("checked against the bounds above");
    match ScramCredential::from_salted_password(
        mechanism,
        &upsertion.salted_password,
        &upsertion.salt,
        iterations,
    ) {
        Ok(credential) => Outcome::Upsert(mechanism, credential),
        Err(error) => unacceptable(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    use super::*;
    use strata_protocol::sasl::SaltedPassword;

    const SHA256: i8 = 1;
    const SHA512: i8 = 2;

    fn upsertion(user: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        let hash = Mechanism::from_scram_type(mechanism).unwrap_or(Mechanism::ScramSha256);
        let salted = SaltedPassword::derive(hash, "pw", b"salt", 4096).unwrap();
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.into()))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from(salted.salt))
            .with_salted_password(Bytes::from(salted.salted_password))
    }

    fn deletion(user: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(user.into()))
            .with_mechanism(mechanism)
    }

    fn alter(
        store: &CredentialStore,
        deletions: Vec<ScramCredentialDeletion>,
        upsertions: Vec<ScramCredentialUpsertion>,
    ) -> Vec<(String, i16)> {
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(deletions)
            .with_upsertions(upsertions);
        alter_in(store, &request)
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect()
    }

    fn describe(
        store: &CredentialStore,
        users: Option<&[&str]>,
    ) -> DescribeUserScramCredentialsResponse {
        let users = users.map(|users| {
            users
                .iter()
                .map(|u| UserName::default().with_name(StrBytes::from_string(u.to_string())))
                .collect()
        });
        describe_in(
            store,
            &DescribeUserScramCredentialsRequest::default().with_users(users),
        )
    }

    #[test]
    fn upserted_credentials_are_described_and_verify_their_password() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        let results = alter(
            &store,
            vec![],
            vec![
                upsertion("alice", SHA512, 4096),
                upsertion("bob", SHA256, 4096),
            ],
        );
        assert_eq!(results, vec![("alice".into(), 0), ("bob".into(), 0)]);
        assert!(store.verify_plain("alice", "pw"));
        assert!(store.scram("bob", Mechanism::ScramSha256).is_some());

        for all in [None, Some(&[][..])] {
            let described = describe(&store, all);
            let users: Vec<_> = described
                .results
                .iter()
                .map(|r| r.user.to_string())
                .collect();
            assert_eq!(users, ["alice", "bob"]);
            let info = &described.results[0].credential_infos[0];
            assert_eq!((info.mechanism, info.iterations), (SHA512, 4096));
        }
    }

    #[test]
    fn describe_names_unknown_and_repeated_users_with_kafkas_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        alter(&store, vec![], vec![upsertion("alice", SHA256, 4096)]);
        let described = describe(&store, Some(&["ghost", "alice", "alice"]));
        let codes: Vec<_> = described
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect();
        assert_eq!(
            codes,
            vec![
                ("ghost".into(), ErrorCode::ResourceNotFound.code()),
                ("alice".into(), ErrorCode::DuplicateResource.code()),
            ]
        );
        assert!(described.results[1].credential_infos.is_empty());
    }

    #[test]
    fn alter_refuses_what_kafka_refuses_and_applies_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        let results = alter(
            &store,
            vec![
                deletion("nobody", SHA256),
                deletion("twice", SHA256),
                deletion("weird", 0),
            ],
            vec![
                upsertion("twice", SHA512, 4096),
                upsertion("", SHA256, 4096),
                upsertion("few", SHA256, 4095),
                upsertion("many", SHA256, 16385),
                upsertion("ok", SHA256, 16384),
            ],
        );
        assert_eq!(
            results,
            vec![
                ("nobody".into(), ErrorCode::ResourceNotFound.code()),
                ("twice".into(), ErrorCode::DuplicateResource.code()),
                ("weird".into(), ErrorCode::UnsupportedSaslMechanism.code()),
                ("".into(), ErrorCode::UnacceptableCredential.code()),
                ("few".into(), ErrorCode::UnacceptableCredential.code()),
                ("many".into(), ErrorCode::UnacceptableCredential.code()),
                ("ok".into(), 0),
            ]
        );
        let users: Vec<_> = store.list().into_iter().map(|u| u.user).collect();
        assert_eq!(users, ["ok"]);
    }

    #[test]
    fn a_salted_password_of_the_wrong_length_is_unacceptable() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        let short = upsertion("alice", SHA512, 4096).with_salted_password(Bytes::from(vec![0; 32]));
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![short]);
        let result = &alter_in(&store, &request).results[0];
        assert_eq!(result.error_code, ErrorCode::UnacceptableCredential.code());
        let message = result.error_message.as_ref().unwrap().to_string();
        assert!(message.contains("64 bytes"), "{message}");
        assert!(store.list().is_empty());
    }

    #[test]
    fn a_deletion_removes_one_mechanism() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        alter(&store, vec![], vec![upsertion("carol", SHA256, 4096)]);
        alter(&store, vec![], vec![upsertion("carol", SHA512, 8192)]);
        assert_eq!(
            alter(&store, vec![deletion("carol", SHA256)], vec![]),
            vec![("carol".into(), 0)]
        );
        assert_eq!(
            store.list()[0].mechanisms,
            vec![(Mechanism::ScramSha512, 8192)]
        );
        assert_eq!(
            alter(&store, vec![deletion("carol", SHA256)], vec![]),
            vec![("carol".into(), ErrorCode::ResourceNotFound.code())]
        );
    }
}
