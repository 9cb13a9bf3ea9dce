//! The client side of TLS: a rustls configuration built from
//! [`ClientSecurity`] and the handshake over a connected socket.
//!
//! Trust comes only from `ssl.ca.location` (no system store: a broker's
//! CA is named, not assumed). The server name checked is the host of the
//! address connected to, a name or an IP address; with
//! `ssl.endpoint.identification.algorithm` empty the chain is still
//! verified, only the name is not.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::ClientError;
use super::security::ClientSecurity;
use strata_protocol::security::{certificates, crypto_provider, private_key, root_store};

/// Builds the rustls configuration `security` asks for.
pub(crate) fn client_config(
    security: &ClientSecurity,
) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let settings = |reason: String| ClientError::Security(reason);
    let ca = security.ca_location.as_deref().ok_or_else(|| {
        settings(format!(
            "{} needs ssl.ca.location (--ssl-ca-location): the CA certificate(s) that signed the broker's",
            security.protocol
        ))
    })?;
    let provider = crypto_provider();
    let roots = Arc::new(root_store(ca).map_err(|e| settings(e.to_string()))?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
        .build()
        .map_err(|e| settings(format!("{}: {e}", ca.display())))?;
    let verifier: Arc<dyn ServerCertVerifier> = if security.verify_host_name {
        verifier
    } else {
        Arc::new(AnyHostName(verifier))
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| settings(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&security.certificate_location, &security.key_location) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert).map_err(|e| settings(e.to_string()))?;
            let key = private_key(key).map_err(|e| settings(e.to_string()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| settings(format!("client certificate {}: {e}", cert.display())))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(settings(
                "give ssl.certificate.location and ssl.key.location together".into(),
            ));
        }
    };
    Ok(Arc::new(config))
}

/// Runs the TLS handshake on `stream`, checking the certificate names
/// the host of `addr`.
pub(crate) async fn handshake(
    config: Arc<rustls::ClientConfig>,
    addr: &str,
    stream: TcpStream,
) -> Result<TlsStream<TcpStream>, ClientError> {
    let host = host_of(addr);
    let name = ServerName::try_from(host.to_string()).map_err(|_| {
        ClientError::Security(format!("{host:?} is neither a host name nor an IP address"))
    })?;
    TlsConnector::from(config)
        .connect(name, stream)
        .await
        .map_err(|error| ClientError::Tls {
            addr: addr.to_string(),
            reason: explain(&error),
            error: Arc::new(error),
        })
}

/// The host of `host:port` (`[v6]:port` without its brackets).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A handshake failure, said in terms of what to check.
fn explain(error: &std::io::Error) -> String {
    let Some(tls) = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return error.to_string();
    };
    match tls {
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => "the broker's certificate is not trusted: it is not signed by a CA in ssl.ca.location"
            .into(),
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "the broker's certificate does not name the host connected to (connect by a name it holds, or set ssl.endpoint.identification.algorithm empty)".into(),
        rustls::Error::InvalidCertificate(other) => {
            format!("the broker's certificate is not trusted: {other:?}")
        }
        other => other.to_string(),
    }
}

/// Verifies the chain as the inner verifier does, whatever host it names.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_drops_the_port_and_brackets() {
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("broker.example:9093"), "broker.example");
    }
}
