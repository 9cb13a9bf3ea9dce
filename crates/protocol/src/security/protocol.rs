//! Kafka's four security protocols: whether a listener speaks TLS, and
//! whether it requires SASL before any other request.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [Self; 4] = [
        Self::Plaintext,
        Self::Ssl,
        Self::SaslPlaintext,
        Self::SaslSsl,
    ];

    /// Kafka's name, as `security.protocol` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Case-insensitive, as Kafka's clients take `security.protocol`.
impl FromStr for SecurityProtocol {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                format!(
                    "unknown security protocol {text:?}: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
                )
            })
    }
}

impl<'de> serde::Deserialize<'de> for SecurityProtocol {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_any_case() {
        for protocol in SecurityProtocol::ALL {
            assert_eq!(protocol.name().parse::<SecurityProtocol>(), Ok(protocol));
            assert_eq!(
                protocol.name().to_lowercase().parse::<SecurityProtocol>(),
                Ok(protocol)
            );
        }
        assert!("TLS".parse::<SecurityProtocol>().is_err());
    }
}
