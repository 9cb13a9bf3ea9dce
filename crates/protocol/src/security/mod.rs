//! What the broker and the client share to secure a connection: Kafka's
//! security protocols, TLS material read from PEM files, and the principal
//! name a certificate stands for.

mod distinguished_name;
mod pem;
mod protocol;

pub use distinguished_name::{DistinguishedNameError, subject_name};
pub use pem::{TlsFileError, certificates, crypto_provider, private_key, root_store};
pub use protocol::SecurityProtocol;
