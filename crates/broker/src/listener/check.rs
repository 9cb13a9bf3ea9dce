//! The listener set as a whole: names and addresses unique, TLS material
//! present where a listener speaks TLS, and the safe default — a listener
//! that lets anyone in unauthenticated (PLAINTEXT, or SSL without required
//! client certificates) binds to loopback only, unless the operator says
//! otherwise in so many words (`allow_unauthenticated_remote = true`).

use std::collections::BTreeSet;

use super::{ListenerConfig, SecurityProtocol};
use crate::auth::{ClientAuth, TlsSettings};
use strata_protocol::sasl::Mechanism;

/// Refuses listener sets that could not serve or would serve unsafely;
/// the message names the listener and what to change.
pub fn check_listeners(
    listeners: &[ListenerConfig],
    tls: Option<&TlsSettings>,
    allow_unauthenticated_remote: bool,
) -> Result<(), String> {
    if listeners.is_empty() {
        return Err("no listener configured".into());
    }
    let mut names = BTreeSet::new();
    let mut addresses = BTreeSet::new();
    for listener in listeners {
        if !names.insert(listener.name.as_str()) {
            return Err(format!("two listeners are named {}", listener.name));
        }
        if listener.listen.port() != 0 && !addresses.insert(listener.listen) {
            return Err(format!("two listeners bind {}", listener.listen));
        }
        if listener.protocol.uses_tls() && tls.is_none() {
            return Err(format!(
                "listener {} is {}: set [tls] cert and key (or --tls-cert and --tls-key)",
                listener.name, listener.protocol
            ));
        }
        if !allow_unauthenticated_remote
            && !authenticates(listener.protocol, tls)
            && !listener.listen.ip().is_loopback()
        {
            return Err(format!(
                "listener {} ({} on {}) would let anyone who reaches it read, write and delete \
                 every topic: use SASL_SSL, SASL_PLAINTEXT or SSL with client_auth = \"required\", \
                 bind it to loopback, or set allow_unauthenticated_remote = true \
                 (--allow-unauthenticated-remote) to accept that",
                listener.name, listener.protocol, listener.listen
            ));
        }
    }
    if let Some(tls) = tls {
        tls.check()?;
    }
    Ok(())
}

/// What is allowed but unwise in the listener set, one sentence each: PLAIN
/// on a SASL_PLAINTEXT listener beyond loopback sends every password in
/// clear (Kafka allows it too). SCRAM never sends the password, and TLS
/// encrypts it.
pub fn listener_warnings(listeners: &[ListenerConfig], mechanisms: &[Mechanism]) -> Vec<String> {
    if !mechanisms.contains(&Mechanism::Plain) {
        return Vec::new();
    }
    listeners
        .iter()
        .filter(|l| l.protocol == SecurityProtocol::SaslPlaintext && !l.listen.ip().is_loopback())
        .map(|l| {
            format!(
                "listener {} (SASL_PLAINTEXT on {}) accepts PLAIN: passwords cross the network \
                 in clear; use SASL_SSL, or leave PLAIN out of [sasl] mechanisms",
                l.name, l.listen
            )
        })
        .collect()
}

/// Whether a listener knows who its clients are: SASL, or TLS with
/// required client certificates.
pub fn authenticates(protocol: SecurityProtocol, tls: Option<&TlsSettings>) -> bool {
    protocol.uses_sasl()
        || (protocol == SecurityProtocol::Ssl
            && tls.is_some_and(|tls| tls.client_auth == ClientAuth::Required))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(text: &str) -> ListenerConfig {
        text.parse().unwrap()
    }

    fn tls(client_auth: ClientAuth) -> TlsSettings {
        TlsSettings {
            cert: "cert.pem".into(),
            key: "key.pem".into(),
            client_ca: Some("ca.pem".into()),
            client_auth,
        }
    }

    #[test]
    fn unauthenticated_listeners_stay_on_loopback_unless_allowed() {
        let open = [listener("PLAINTEXT://0.0.0.0:9092")];
        let error = check_listeners(&open, None, false).unwrap_err();
        assert!(error.contains("allow_unauthenticated_remote"), "{error}");
        check_listeners(&open, None, true).unwrap();
        check_listeners(&[listener("PLAINTEXT://127.0.0.1:9092")], None, false).unwrap();
        check_listeners(&[listener("PLAINTEXT://[::1]:9092")], None, false).unwrap();

        let ssl = [listener("SSL://0.0.0.0:9093")];
        assert!(check_listeners(&ssl, Some(&tls(ClientAuth::None)), false).is_err());
        assert!(check_listeners(&ssl, Some(&tls(ClientAuth::Requested)), false).is_err());
        check_listeners(&ssl, Some(&tls(ClientAuth::Required)), false).unwrap();
        check_listeners(&[listener("SASL_PLAINTEXT://0.0.0.0:9094")], None, false).unwrap();
    }

    #[test]
    fn plain_beyond_loopback_without_tls_is_warned_about() {
        let all = [Mechanism::ScramSha512, Mechanism::Plain];
        let remote = [listener("SASL_PLAINTEXT://0.0.0.0:9094")];
        let warnings = listener_warnings(&remote, &all);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("in clear"), "{warnings:?}");
        assert!(listener_warnings(&remote, &[Mechanism::ScramSha512]).is_empty());
        let safe = [
            listener("SASL_PLAINTEXT://127.0.0.1:9094"),
            listener("SASL_SSL://0.0.0.0:9095"),
        ];
        assert!(listener_warnings(&safe, &all).is_empty());
    }

    #[test]
    fn tls_listeners_need_tls_material_and_names_are_unique() {
        let error = check_listeners(&[listener("SSL://127.0.0.1:9093")], None, false).unwrap_err();
        assert!(error.contains("[tls]"), "{error}");
        let twice = [
            listener("A:PLAINTEXT://127.0.0.1:9092"),
            listener("A:PLAINTEXT://127.0.0.1:9093"),
        ];
        assert!(check_listeners(&twice, None, false).is_err());
        let same_port = [
            listener("A:PLAINTEXT://127.0.0.1:9092"),
            listener("B:PLAINTEXT://127.0.0.1:9092"),
        ];
        assert!(check_listeners(&same_port, None, false).is_err());
        assert!(check_listeners(&[], None, false).is_err());
        let mut missing_ca = tls(ClientAuth::Required);
        missing_ca.client_ca = None;
        let error = check_listeners(
            &[listener("SSL://127.0.0.1:9093")],
            Some(&missing_ca),
            false,
        )
        .unwrap_err();
        assert!(error.contains("client_ca"), "{error}");
    }
}
