//! Certificates made for one test (rcgen): a CA, a server certificate for
//! 127.0.0.1 and localhost, client certificates with a chosen subject, and
//! a second CA nobody trusts. Written as PEM files into a directory of the
//! test's own; nothing is checked in.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, SanType,
};

/// A CA able to sign certificates.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    /// Its certificate, in PEM.
    pub pem: PathBuf,
}

/// A certificate and its key, as PEM files.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Authority {
    /// A self-signed CA named `name`, its certificate written to
    /// `dir/<name>.pem`.
    pub fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = names(&[(DnType::CommonName, name)]);
        let key = KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, certificate.pem()).unwrap();
        Self {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server certificate for 127.0.0.1, ::1 and localhost.
    pub fn server(&self, dir: &Path, name: &str) -> Issued {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params
            .subject_alt_names
            .push(SanType::IpAddress("::1".parse().unwrap()));
        params.distinguished_name = names(&[(DnType::CommonName, "localhost")]);
        self.issue(dir, name, params)
    }

    /// A server certificate naming `host` only (no address).
    pub fn server_for(&self, dir: &Path, name: &str, host: &str) -> Issued {
        let mut params = CertificateParams::new(vec![host.to_string()]).unwrap();
        params.distinguished_name = names(&[(DnType::CommonName, host)]);
        self.issue(dir, name, params)
    }

    /// A client certificate whose subject is `subject`, in encoding order
    /// (e.g. O then CN).
    pub fn client(&self, dir: &Path, name: &str, subject: &[(DnType, &str)]) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = names(subject);
        self.issue(dir, name, params)
    }

    fn issue(&self, dir: &Path, name: &str, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        let issued = Issued {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&issued.cert, certificate.pem()).unwrap();
        std::fs::write(&issued.key, key.serialize_pem()).unwrap();
        issued
    }
}

fn names(subject: &[(DnType, &str)]) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for (kind, value) in subject {
        name.push(kind.clone(), *value);
    }
    name
}
