//! Who a request comes from: the principal a connection authenticated as
//! (through SASL or a client certificate, or none), as the ACLs name it;
//! the TLS that carries it, and the SCRAM credentials SASL authenticates
//! against.

mod credentials;
mod sasl_session;
mod sasl_settings;
mod security_dir;
mod tls;

pub use credentials::{CredentialError, CredentialStore, Credentials, USERS_MAX, UserCredentials};
pub use sasl_session::SASL_FRAME_BYTES_MAX;
pub(crate) use sasl_session::{SaslSession, Step};
pub use sasl_settings::SaslSettings;
pub use security_dir::{SECURITY_DIR, security_dir};
pub use strata_protocol::principal::{Caller, Principal};
pub use tls::{ClientAuth, RELOAD_CHECK_INTERVAL, TLS_HANDSHAKE_TIMEOUT, TlsReloader, TlsSettings};
