//! Listeners: each a name, a security protocol and an address, as Kafka
//! defines them, so a broker can serve loopback PLAINTEXT for local tools
//! and SASL_SSL to the network at once.
//!
//! A client is told, in Metadata and FindCoordinator, the advertised
//! address of the listener its request arrived on, never another one's:
//! a client that connected over TLS stays on TLS.

mod check;

use std::net::SocketAddr;
use std::str::FromStr;

pub use check::{authenticates, check_listeners, listener_warnings};
pub use strata_protocol::security::SecurityProtocol;

/// One listener as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// The listener's name (Kafka's listener name); the protocol's name
    /// unless given.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Address to bind; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Host and port clients are told to connect to; the broker's
    /// `advertised_host` and the bound port when unset.
    pub advertised: Option<(String, u16)>,
}

impl ListenerConfig {
    /// A listener named after its protocol.
    pub fn new(protocol: SecurityProtocol, listen: SocketAddr) -> Self {
        Self {
            name: protocol.name().to_string(),
            protocol,
            listen,
            advertised: None,
        }
    }
}

/// `PROTOCOL://HOST:PORT` or `NAME:PROTOCOL://HOST:PORT`, as `--listener`
/// takes it (e.g. `SASL_SSL://0.0.0.0:9093`, `LOCAL:PLAINTEXT://127.0.0.1:9092`).
impl FromStr for ListenerConfig {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let form = "the form [NAME:]PROTOCOL://HOST:PORT, e.g. SASL_SSL://0.0.0.0:9093";
        let (head, address) = text
            .split_once("://")
            .ok_or_else(|| format!("listener {text:?} is not of {form}"))?;
        let (name, protocol) = match head.split_once(':') {
            Some((name, protocol)) => (Some(name), protocol),
            None => (None, head),
        };
        let protocol: SecurityProtocol = protocol.parse()?;
        let listen: SocketAddr = address
            .parse()
            .map_err(|e| format!("listener {text:?}: address {address:?}: {e}"))?;
        let name = match name {
            Some(name) => {
                check_name(name)?;
                name.to_string()
            }
            None => protocol.name().to_string(),
        };
        Ok(Self {
            name,
            protocol,
            listen,
            advertised: None,
        })
    }
}

/// Listener names as Kafka allows them: letters, digits, `_` and `-`.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "listener name {name:?} must be letters, digits, '_' or '-'"
        ));
    }
    Ok(())
}

/// Parses `HOST:PORT` for an advertised address (a host name is allowed,
/// unlike a bind address).
pub fn parse_advertised(text: &str) -> Result<(String, u16), String> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("advertised address {text:?} is not HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("advertised address {text:?}: {port:?} is not a port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("advertised address {text:?} has no host"));
    }
    Ok((host.to_string(), port))
}

/// What a connection's requests need of the listener it arrived on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// What clients are told to connect to, for this listener.
    pub host: String,
    pub port: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_with_and_without_a_name() {
        let plain: ListenerConfig = "PLAINTEXT://127.0.0.1:9092".parse().unwrap();
        assert_eq!(plain.name, "PLAINTEXT");
        assert_eq!(plain.protocol, SecurityProtocol::Plaintext);
        assert_eq!(plain.listen, "127.0.0.1:9092".parse().unwrap());
        let named: ListenerConfig = "EXTERNAL:SASL_SSL://[::]:9093".parse().unwrap();
        assert_eq!(named.name, "EXTERNAL");
        assert_eq!(named.protocol, SecurityProtocol::SaslSsl);
        for bad in [
            "127.0.0.1:9092",
            "TLS://127.0.0.1:9092",
            "SSL://localhost:9093",
            "a b:SSL://127.0.0.1:1",
            ":SSL://127.0.0.1:1",
            "SSL://127.0.0.1",
        ] {
            assert!(bad.parse::<ListenerConfig>().is_err(), "{bad}");
        }
    }

    #[test]
    fn advertised_addresses_take_host_names() {
        assert_eq!(
            parse_advertised("broker.example.com:9093").unwrap(),
            ("broker.example.com".to_string(), 9093)
        );
        assert_eq!(
            parse_advertised("[::1]:9093").unwrap(),
            ("::1".to_string(), 9093)
        );
        for bad in ["broker", ":9093", "broker:x", "broker:70000"] {
            assert!(parse_advertised(bad).is_err(), "{bad}");
        }
    }
}
