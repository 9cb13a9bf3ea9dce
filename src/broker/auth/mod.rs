//! Who a request comes from: the principal a connection authenticated as
//! (through SASL or a client certificate, or none), as the ACLs name it.

mod principal;

pub use principal::{Caller, Principal};
