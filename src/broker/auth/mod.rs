//! Who a request comes from: the principal a connection authenticated as
//! (through SASL or a client certificate, or none), as the ACLs name it;
//! and the SCRAM credentials SASL authenticates against.

mod credentials;
mod principal;

pub use credentials::{
    CredentialError, CredentialStore, Credentials, SECURITY_DIR, USERS_MAX, UserCredentials,
};
pub use principal::{Caller, Principal};
