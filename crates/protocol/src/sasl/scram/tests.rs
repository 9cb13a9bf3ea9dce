//! Whole SCRAM exchanges, client against server: RFC 7677's example byte
//! for byte, round trips and wrong passwords under random names and
//! passwords, and arbitrary or tampered bytes fed to every step. Every
//! property runs from a fixed seed so a failure reproduces.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

use super::*;

const SEED: u64 = 0x5c2a_3e7f_0d11;

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(SEED),
        // The seed is fixed, so a failure needs no file to be replayed.
        failure_persistence: None,
        max_shrink_iters: 500,
        ..Config::default()
    })
}

/// A whole exchange of `client` against a server holding `stored` for
/// `user` (and nothing for anyone else). Returns who the server
/// authenticated, or the first error.
fn exchange(
    mechanism: Mechanism,
    user: &str,
    stored: Option<&ScramCredential>,
    client: &mut ScramClient,
) -> Result<String, SaslError> {
    let mut server = ScramServer::new(mechanism).unwrap();
    let server_first = server.receive_client_first(&client.client_first(), |name| {
        (name == user).then(|| stored.cloned()).flatten()
    })?;
    let client_final = client.receive_server_first(&server_first)?;
    let done = server.receive_client_final(&client_final)?;
    client.receive_server_final(&done.server_final)?;
    Ok(done.user)
}

#[test]
fn rfc_7677_example_exchange_is_reproduced_exactly() {
    let mechanism = Mechanism::ScramSha256;
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let stored = ScramCredential::derive(mechanism, "pencil", &salt, 4096).unwrap();
    let mut client =
        ScramClient::with_client_nonce(mechanism, "user", "pencil", "rOprNGfwEbeRWgbNEkqO")
            .unwrap();
    let mut server =
        ScramServer::with_server_nonce(mechanism, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0").unwrap();

    let client_first = client.client_first();
    assert_eq!(client_first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let server_first = server
        .receive_client_first(&client_first, |name| {
            assert_eq!(name, "user");
            Some(stored.clone())
        })
        .unwrap();
    assert_eq!(
        String::from_utf8(server_first.clone()).unwrap(),
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let client_final = client.receive_server_first(&server_first).unwrap();
    assert_eq!(
        String::from_utf8(client_final.clone()).unwrap(),
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
         p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    let done = server.receive_client_final(&client_final).unwrap();
    assert_eq!(done.user, "user");
    assert_eq!(
        String::from_utf8(done.server_final.clone()).unwrap(),
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
    client.receive_server_final(&done.server_final).unwrap();
    assert!(client.is_ended() && server.is_ended());
}

#[test]
fn sha_512_exchanges_authenticate_the_right_password_only() {
    let mechanism = Mechanism::ScramSha512;
    let stored = ScramCredential::generate(mechanism, "s3cret", 4096).unwrap();
    let mut client = ScramClient::new(mechanism, "alice", "s3cret").unwrap();
    assert_eq!(
        exchange(mechanism, "alice", Some(&stored), &mut client).unwrap(),
        "alice"
    );
    let mut wrong = ScramClient::new(mechanism, "alice", "s3cret!").unwrap();
    assert_eq!(
        exchange(mechanism, "alice", Some(&stored), &mut wrong),
        Err(SaslError::AuthenticationFailed)
    );
    // A SHA-256 credential does not answer a SHA-512 exchange.
    let sha256 = ScramCredential::generate(Mechanism::ScramSha256, "s3cret", 4096).unwrap();
    let mut client = ScramClient::new(mechanism, "alice", "s3cret").unwrap();
    assert!(exchange(mechanism, "alice", Some(&sha256), &mut client).is_err());
}

#[test]
fn an_unknown_user_fails_exactly_like_a_wrong_password() {
    let mechanism = Mechanism::ScramSha256;
    let stored = ScramCredential::generate(mechanism, "right", ITERATIONS_DEFAULT).unwrap();
    let mut wrong_password = ScramClient::new(mechanism, "alice", "wrong").unwrap();
    let mut unknown_user = ScramClient::new(mechanism, "mallory", "wrong").unwrap();
    let wrong = exchange(mechanism, "alice", Some(&stored), &mut wrong_password).unwrap_err();
    let unknown = exchange(mechanism, "alice", Some(&stored), &mut unknown_user).unwrap_err();
    assert_eq!(wrong, unknown);
    assert_eq!(wrong, SaslError::AuthenticationFailed);

    // The stand-in offers the same salt every time and looks like a real
    // credential: a salt as long, the default iterations.
    let server_first = |user: &str| {
        let client = ScramClient::new(mechanism, user, "x").unwrap();
        let mut server = ScramServer::new(mechanism).unwrap();
        let first = server
            .receive_client_first(&client.client_first(), |_| None)
            .unwrap();
        let text = String::from_utf8(first).unwrap();
        text.split_once(",s=").unwrap().1.to_string()
    };
    assert_eq!(server_first("mallory"), server_first("mallory"));
    let real = format!("{},i={}", BASE64.encode(&stored.salt), stored.iterations);
    assert_eq!(server_first("mallory").len(), real.len());
}

#[test]
fn the_server_refuses_what_kafka_refuses() {
    let mechanism = Mechanism::ScramSha256;
    let lookup = |_: &str| None;
    let first = |message: &str| {
        ScramServer::new(mechanism)
            .unwrap()
            .receive_client_first(message.as_bytes(), lookup)
            .unwrap_err()
    };
    assert_eq!(
        first("n,,n=u,r=abc,tokenauth=true"),
        SaslError::DelegationToken
    );
    assert_eq!(
        first("p=tls-server-end-point,,n=u,r=abc"),
        SaslError::ChannelBinding
    );
    assert_eq!(first("n,a=admin,n=u,r=abc"), SaslError::AuthorizationId);
    assert_eq!(first("n,,n=,r=abc"), SaslError::EmptyUser);
    let message = first("n,,n=u,r=abc,tokenauth=true").to_string();
    assert!(message.contains("delegation tokens"), "{message}");
    assert!(ScramServer::new(Mechanism::Plain).is_err());
}

#[test]
fn the_server_checks_channel_binding_and_nonce_of_client_final() {
    let mechanism = Mechanism::ScramSha256;
    let stored = ScramCredential::derive(mechanism, "pencil", b"salt", 4096).unwrap();
    let run = |rewrite: &dyn Fn(String) -> String| {
        let mut client = ScramClient::new(mechanism, "user", "pencil").unwrap();
        let mut server = ScramServer::new(mechanism).unwrap();
        let server_first = server
            .receive_client_first(&client.client_first(), |_| Some(stored.clone()))
            .unwrap();
        let client_final = String::from_utf8(client.receive_server_first(&server_first).unwrap());
        let result = server.receive_client_final(rewrite(client_final.unwrap()).as_bytes());
        // Whatever happened, the exchange is over.
        assert!(server.is_ended());
        assert_eq!(
            server.receive_client_final(b"c=biws,r=x,p=AAAA"),
            Err(SaslError::OutOfOrder)
        );
        result
    };
    assert!(run(&|m| m).is_ok());
    assert_eq!(
        run(&|m| m.replacen("c=biws", "c=eSws", 1)),
        Err(SaslError::ChannelBinding)
    );
    // A nonce must end with the exchange's; one with more in front is the
    // exchange's (as Kafka takes it), so only the proof then fails.
    assert_eq!(
        run(&|m| m.replacen(",p=", "x,p=", 1)),
        Err(SaslError::NonceMismatch)
    );
    assert_eq!(
        run(&|m| m.replacen(",r=", ",r=x", 1)),
        Err(SaslError::AuthenticationFailed)
    );
    assert_eq!(
        run(&|m| m.replacen(",p=", ",x=y,p=", 1)),
        Err(SaslError::AuthenticationFailed)
    );
}

#[test]
fn the_client_refuses_a_dubious_server_first() {
    let mechanism = Mechanism::ScramSha256;
    let answer = |server_first: &str| {
        let mut client =
            ScramClient::with_client_nonce(mechanism, "user", "pencil", "abc").unwrap();
        client.receive_server_first(server_first.as_bytes())
    };
    assert!(answer("r=abcdef,s=c2FsdA==,i=4096").is_ok());
    assert_eq!(
        answer("r=abc,s=c2FsdA==,i=4096"),
        Err(SaslError::NonceMismatch)
    );
    assert_eq!(
        answer("r=xbcdef,s=c2FsdA==,i=4096"),
        Err(SaslError::NonceMismatch)
    );
    for iterations in [1, 4095, CLIENT_ITERATIONS_MAX + 1, 999_999_999] {
        let result = answer(&format!("r=abcdef,s=c2FsdA==,i={iterations}"));
        assert!(
            matches!(result, Err(SaslError::Iterations { .. })),
            "{result:?}"
        );
    }
    assert_eq!(
        answer("e=unknown-user"),
        Err(SaslError::ServerError("unknown-user".into()))
    );
}

#[test]
fn the_client_checks_the_servers_signature_and_surfaces_its_error() {
    let mechanism = Mechanism::ScramSha512;
    let stored = ScramCredential::derive(mechanism, "pencil", b"salt", 4096).unwrap();
    let finish = |server_final: Option<&[u8]>| {
        let mut client = ScramClient::new(mechanism, "user", "pencil").unwrap();
        let mut server = ScramServer::new(mechanism).unwrap();
        let first = server
            .receive_client_first(&client.client_first(), |_| Some(stored.clone()))
            .unwrap();
        let done = server
            .receive_client_final(&client.receive_server_first(&first).unwrap())
            .unwrap();
        client.receive_server_final(server_final.unwrap_or(&done.server_final))
    };
    assert!(finish(None).is_ok());
    let forged = format!("v={}", BASE64.encode([7u8; 64]));
    assert_eq!(
        finish(Some(forged.as_bytes())),
        Err(SaslError::ServerSignature)
    );
    assert_eq!(
        finish(Some(b"e=invalid-proof")),
        Err(SaslError::ServerError("invalid-proof".into()))
    );
}

/// User names and passwords of any characters but NUL, commas and equals
/// signs among them.
fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{1,12}", "[,=a-z0-9]{1,16}", "[^\u{0}]{1,24}",]
}

#[test]
fn any_user_and_password_round_trip() {
    runner(48)
        .run(
            &(name(), name(), prop::bool::ANY),
            |(user, password, sha512)| {
                let mechanism = if sha512 {
                    Mechanism::ScramSha512
                } else {
                    Mechanism::ScramSha256
                };
                let stored = ScramCredential::generate(mechanism, &password, 4096).unwrap();
                let mut client = ScramClient::new(mechanism, &user, &password).unwrap();
                let authenticated = exchange(mechanism, &user, Some(&stored), &mut client);
                prop_assert_eq!(authenticated, Ok(user));
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn a_wrong_password_always_fails() {
    runner(48)
        .run(&(name(), name(), name()), |(user, password, other)| {
            prop_assume!(password != other);
            let mechanism = Mechanism::ScramSha256;
            let stored = ScramCredential::generate(mechanism, &password, 4096).unwrap();
            let mut client = ScramClient::new(mechanism, &user, &other).unwrap();
            let result = exchange(mechanism, &user, Some(&stored), &mut client);
            prop_assert_eq!(result, Err(SaslError::AuthenticationFailed));
            Ok(())
        })
        .unwrap();
}

/// A message damaged one of several ways: a byte changed, cut short,
/// a byte inserted, or replaced by arbitrary bytes.
fn tamper(message: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = message.len();
    prop_oneof![
        (0..len, any::<u8>()).prop_map({
            let message = message.clone();
            move |(at, byte)| {
                let mut damaged = message.clone();
                damaged[at] = if damaged[at] == byte { byte ^ 1 } else { byte };
                damaged
            }
        }),
        (0..len).prop_map({
            let message = message.clone();
            move |cut| message[..cut].to_vec()
        }),
        (0..=len, any::<u8>()).prop_map({
            let message = message.clone();
            move |(at, byte)| {
                let mut damaged = message.clone();
                damaged.insert(at, byte);
                damaged
            }
        }),
        proptest::collection::vec(any::<u8>(), 0..256),
    ]
}

/// The password and the base64 of the proof must never appear in an error.
fn assert_no_secret(error: &SaslError, secrets: &[&str]) -> Result<(), TestCaseError> {
    let shown = format!("{error} {error:?}");
    for secret in secrets {
        prop_assert!(!shown.contains(secret), "{shown}");
    }
    Ok(())
}

#[test]
fn garbage_into_every_server_step_is_refused_cleanly() {
    let mechanism = Mechanism::ScramSha256;
    let password = "correct-horse-battery";
    let stored = ScramCredential::derive(mechanism, password, b"salt", 4096).unwrap();
    let mut client =
        ScramClient::with_client_nonce(mechanism, "user", password, "clientnonce").unwrap();
    let client_first = client.client_first();
    // Each case's server is past client-first at this same server nonce,
    // so only the damage decides.
    let server_nonce = "servernonce";
    let mut server = ScramServer::with_server_nonce(mechanism, server_nonce).unwrap();
    let server_first = server
        .receive_client_first(&client_first, |_| Some(stored.clone()))
        .unwrap();
    let client_final = client.receive_server_first(&server_first).unwrap();
    let proof = String::from_utf8(client_final.clone()).unwrap();
    let proof = proof.rsplit_once(",p=").unwrap().1.to_string();

    runner(2_000)
        .run(&tamper(client_first.clone()), |damaged| {
            let mut server = ScramServer::new(mechanism).unwrap();
            if let Err(error) = server.receive_client_first(&damaged, |_| Some(stored.clone())) {
                assert_no_secret(&error, &[password])?;
                prop_assert!(server.is_ended());
            }
            Ok(())
        })
        .unwrap();

    runner(2_000)
        .run(&tamper(client_final.clone()), |damaged| {
            let mut server = ScramServer::with_server_nonce(mechanism, server_nonce).unwrap();
            server
                .receive_client_first(&client_first, |_| Some(stored.clone()))
                .unwrap();
            match server.receive_client_final(&damaged) {
                // Every byte of client-final is in AuthMessage or is the
                // proof: a changed message cannot authenticate.
                Ok(_) => prop_assert_eq!(&damaged, &client_final),
                Err(error) => assert_no_secret(&error, &[password, &proof])?,
            }
            prop_assert!(server.is_ended());
            Ok(())
        })
        .unwrap();
}

#[test]
fn garbage_into_every_client_step_is_refused_cleanly() {
    let mechanism = Mechanism::ScramSha512;
    let password = "correct-horse-battery";
    let stored = ScramCredential::derive(mechanism, password, b"salt", 4096).unwrap();
    let client_nonce = "clientnonce";
    let new_client =
        || ScramClient::with_client_nonce(mechanism, "user", password, client_nonce).unwrap();
    let mut server = ScramServer::with_server_nonce(mechanism, "servernonce").unwrap();
    let server_first = server
        .receive_client_first(&new_client().client_first(), |_| Some(stored.clone()))
        .unwrap();
    let client_final = new_client().receive_server_first(&server_first).unwrap();
    let done = server.receive_client_final(&client_final).unwrap();

    // Each case may run a PBKDF2 of up to CLIENT_ITERATIONS_MAX rounds.
    runner(200)
        .run(&tamper(server_first.clone()), |damaged| {
            let mut client = new_client();
            if let Err(error) = client.receive_server_first(&damaged) {
                assert_no_secret(&error, &[password])?;
                prop_assert!(client.is_ended());
            }
            Ok(())
        })
        .unwrap();

    // Past server-first once: each case goes on from a copy.
    let mut answered = new_client();
    answered.receive_server_first(&server_first).unwrap();
    runner(2_000)
        .run(&tamper(done.server_final.clone()), |damaged| {
            let mut client = answered.clone();
            match client.receive_server_final(&damaged) {
                Ok(()) => prop_assert_eq!(&damaged, &done.server_final),
                Err(error) => assert_no_secret(&error, &[password])?,
            }
            prop_assert!(client.is_ended());
            Ok(())
        })
        .unwrap();
}
