//! The principal name of a client certificate: its subject's
//! distinguished name in RFC 2253 form, as Kafka's default principal
//! builder writes it (Java's `X500Principal.getName()`), so ACLs written
//! for Kafka (`User:CN=app,OU=payments,O=Example`) match here unchanged.
//!
//! RFC 2253 lists the relative names last-encoded first, joins them with
//! `,` (and the attributes of one with `+`), names the attribute types it
//! knows by keyword and the rest by dotted OID with the value's DER
//! encoding in hex (`1.2.840.113549.1.9.1=#1611...`), and escapes
//! `, + " \ < > ;`, a leading `#` or space and a trailing space with a
//! backslash.

use x509_parser::der_parser::asn1_rs::ToDer;
use x509_parser::x509::AttributeTypeAndValue;

/// The keywords RFC 2253 (and Java) use; every other type is written as
/// its dotted OID.
const KEYWORDS: [(&str, &str); 9] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

#[derive(Debug, thiserror::Error)]
pub enum DistinguishedNameError {
    #[error("the client certificate does not parse as X.509: {0}")]
    Certificate(String),
}

/// The RFC 2253 subject name of a DER certificate.
pub fn subject_name(certificate_der: &[u8]) -> Result<String, DistinguishedNameError> {
    let (_, certificate) = x509_parser::parse_x509_certificate(certificate_der)
        .map_err(|e| DistinguishedNameError::Certificate(e.to_string()))?;
    let names: Vec<String> = certificate
        .subject()
        .iter_rdn()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect();
    Ok(names.into_iter().rev().collect::<Vec<_>>().join(","))
}

fn attribute(attribute: &AttributeTypeAndValue<'_>) -> String {
    let oid = attribute.attr_type().to_id_string();
    let keyword = KEYWORDS
        .iter()
        .find(|(known, _)| *known == oid)
        .map(|(_, keyword)| *keyword);
    match (keyword, string_value(attribute)) {
        (Some(keyword), Some(value)) => format!("{keyword}={}", escape(value)),
        (keyword, _) => {
            let der = attribute.attr_value().to_der_vec().unwrap_or_default();
            format!(
                "{}=#{}",
                keyword.unwrap_or(&oid),
                strata_record::hex::hex(&der)
            )
        }
    }
}

/// The value as text when it is one of the string types a name holds.
fn string_value<'a>(attribute: &'a AttributeTypeAndValue<'_>) -> Option<&'a str> {
    attribute.as_str().ok().or_else(|| {
        // BMPString and UniversalString are not read as text; TeletexString
        // is, when its bytes are UTF-8 (as certificates in practice write it).
        std::str::from_utf8(attribute.as_slice()).ok().filter(|_| {
            attribute.attr_value().tag() == x509_parser::der_parser::asn1_rs::Tag::TeletexString
        })
    })
}

fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    fn certificate(subject: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        for (kind, value) in subject {
            name.push(kind.clone(), *value);
        }
        params.distinguished_name = name;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn names_are_written_most_specific_first_with_keywords() {
        let der = certificate(&[
            (DnType::CountryName, "DE"),
            (DnType::OrganizationName, "Example"),
            (DnType::OrganizationalUnitName, "payments"),
            (DnType::CommonName, "app"),
        ]);
        assert_eq!(
            subject_name(&der).unwrap(),
            "CN=app,OU=payments,O=Example,C=DE"
        );
    }

    #[test]
    fn special_characters_are_escaped() {
        let der = certificate(&[(DnType::CommonName, "#a, b+c\"d\\e<f>g;h ")]);
        assert_eq!(
            subject_name(&der).unwrap(),
            "CN=\\#a\\, b\\+c\\\"d\\\\e\\<f\\>g\\;h\\ "
        );
    }

    #[test]
    fn types_without_a_keyword_are_written_as_oids_with_hex_values() {
        let email = DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]);
        let der = certificate(&[(DnType::CommonName, "app"), (email, "a@b")]);
        let name = subject_name(&der).unwrap();
        assert!(name.starts_with("1.2.840.113549.1.9.1=#"), "{name}");
        assert!(name.ends_with(",CN=app"), "{name}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [&b""[..], b"\x30\x82\xff\xff", b"not a certificate"] {
            assert!(subject_name(bytes).is_err());
        }
    }
}
