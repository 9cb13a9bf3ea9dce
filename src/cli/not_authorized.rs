//! What the commands that talk to a broker say when the cluster's ACLs
//! refuse them: the operation and the resource refused, the principal the
//! broker saw, and the `strata acls add` an administrator runs to allow
//! it. Kafka's answer (TOPIC_AUTHORIZATION_FAILED, …) names only the kind
//! of resource, and retrying it cannot help, so the command stops at the
//! first one. Each command says what its step needs ([`Needs`]): which
//! operation on which resource a refusal of each kind means.

use std::fmt;

use crate::broker::acl::Operation;
use crate::client::error::codes;
use crate::client::{ClientError, ClientSecurity};
use crate::security::{SecurityProtocol, certificates, subject_name};

/// A resource an ACL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    Group(String),
    Cluster,
}

impl Resource {
    /// The resource as `strata acls` flags.
    fn flags(&self) -> String {
        match self {
            Self::Topic(name) => format!("--topic {name}"),
            Self::Group(name) => format!("--group {name}"),
            Self::Cluster => "--cluster".to_string(),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Topic(name) => write!(f, "topic {name}"),
            Self::Group(name) => write!(f, "group {name}"),
            Self::Cluster => write!(f, "the cluster"),
        }
    }
}

/// A command the broker's ACLs refused; `error` is the broker's answer.
#[derive(Debug)]
pub struct NotAuthorized {
    pub principal: String,
    pub operation: Operation,
    pub resource: Resource,
    pub error: ClientError,
}

/// `operation` as `strata acls add --operation` takes it (`describe-configs`).
fn flag(operation: Operation) -> String {
    operation.name().to_ascii_lowercase().replace('_', "-")
}

impl fmt::Display for NotAuthorized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            principal,
            operation,
            resource,
            error,
        } = self;
        let operation = flag(*operation);
        let to = if operation == "write" { " to" } else { "" };
        if principal == "User:ANONYMOUS" {
            // Its own listener cannot add the ACL that would allow it.
            return write!(
                f,
                "not authorized to {operation}{to} {resource} as {principal} ({error}); \
                 a listener that does not authenticate gets only what ACLs allow once any \
                 exists: connect through an authenticated listener, or have the broker name \
                 User:ANONYMOUS in super_users (or set trust_unauthenticated_listeners = true)"
            );
        }
        write!(
            f,
            "not authorized to {operation}{to} {resource} as {principal} ({error}); \
             an administrator can allow it with \
             `strata acls add --allow-principal {} --operation {operation} {}`",
            shell_word(principal),
            resource.flags()
        )
    }
}

/// `text` as one shell word: quoted when it holds anything but letters,
/// digits and `:._-@=` (a certificate's subject holds commas and spaces).
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || ":._-@=".contains(c);
    if text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// No source: the broker's answer is in the message already, and
/// `strata` prints an error's sources after it.
impl std::error::Error for NotAuthorized {}

/// What a step of a command needs, to name what the ACLs refused it:
/// per kind of refusal (Kafka's error code), the operation and the
/// resource it means.
#[derive(Debug)]
pub struct Needs {
    /// What names the principal, looked at only when something is refused
    /// (a client certificate's subject is read from its file).
    security: ClientSecurity,
    refusals: Vec<Refusal>,
}

#[derive(Debug)]
struct Refusal {
    code: i16,
    operation: Operation,
    resource: Resource,
}

impl Needs {
    /// Nothing yet: every refusal passes unchanged.
    fn of(security: &ClientSecurity) -> Self {
        Self {
            security: security.clone(),
            refusals: Vec::new(),
        }
    }

    /// `operation` on `topic`. A refusal on the cluster is one of the
    /// topic operation too: an idempotent producer may write with WRITE on
    /// the topic, and a topic may be created with CREATE on it.
    pub fn new(security: &ClientSecurity, operation: Operation, topic: &str) -> Self {
        let topic = Resource::Topic(topic.to_string());
        Self::of(security)
            .when(codes::TOPIC_AUTHORIZATION_FAILED, operation, topic.clone())
            .when(codes::CLUSTER_AUTHORIZATION_FAILED, operation, topic)
    }

    /// `operation` on the cluster.
    pub fn cluster(security: &ClientSecurity, operation: Operation) -> Self {
        Self::of(security).when(
            codes::CLUSTER_AUTHORIZATION_FAILED,
            operation,
            Resource::Cluster,
        )
    }

    /// `operation` on `group`.
    pub fn group(security: &ClientSecurity, operation: Operation, group: &str) -> Self {
        Self::of(security).when(
            codes::GROUP_AUTHORIZATION_FAILED,
            operation,
            Resource::Group(group.to_string()),
        )
    }

    /// READ on `group` too, if the command joins one.
    pub fn in_group(self, group: Option<&str>) -> Self {
        match group {
            Some(group) => self.when(
                codes::GROUP_AUTHORIZATION_FAILED,
                Operation::Read,
                Resource::Group(group.to_string()),
            ),
            None => self,
        }
    }

    fn when(mut self, code: i16, operation: Operation, resource: Resource) -> Self {
        self.refusals.push(Refusal {
            code,
            operation,
            resource,
        });
        self
    }

    /// [`explain`](Self::explain), or else the error after what the
    /// command was `doing` ("deleting topic orders: …").
    pub fn explain_doing(&self, doing: &str, error: ClientError) -> anyhow::Error {
        self.explain_or(error, |error| anyhow::anyhow!("{doing}: {error}"))
    }

    /// [`explain`](Self::explain), or else `error` as `otherwise` words it.
    pub fn explain_or(
        &self,
        error: ClientError,
        otherwise: impl FnOnce(anyhow::Error) -> anyhow::Error,
    ) -> anyhow::Error {
        let explained = self.explain(error);
        if explained.is::<NotAuthorized>() {
            explained
        } else {
            otherwise(explained)
        }
    }

    /// `error` as a [`NotAuthorized`] if the ACLs refused what this step
    /// needs; otherwise unchanged.
    pub fn explain(&self, error: impl Into<anyhow::Error>) -> anyhow::Error {
        let error = match error.into().downcast::<ClientError>() {
            Ok(error) => error,
            Err(other) => return other,
        };
        let found = (self.refusals.iter()).find(|r| Some(r.code) == error.code());
        match found {
            Some(refusal) => NotAuthorized {
                principal: principal(&self.security),
                operation: refusal.operation,
                resource: refusal.resource.clone(),
                error,
            }
            .into(),
            None => error.into(),
        }
    }
}

/// The principal the broker sees, as far as the client's settings say:
/// the SASL user, the subject of the client certificate (read from its
/// file, as the broker reads it from the handshake), or the anonymous
/// user.
fn principal(security: &ClientSecurity) -> String {
    match (security.protocol, &security.certificate_location) {
        (SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl, _) => {
            format!("User:{}", security.username.as_deref().unwrap_or_default())
        }
        (SecurityProtocol::Ssl, Some(certificate)) => {
            let subject = certificates(certificate)
                .ok()
                .and_then(|chain| subject_name(chain.first()?).ok());
            // The file was read for the connection just made, so it
            // rarely fails here.
            match subject {
                Some(subject) => format!("User:{subject}"),
                None => format!("User:<the subject of {}>", certificate.display()),
            }
        }
        _ => "User:ANONYMOUS".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sasl_user(name: &str) -> ClientSecurity {
        ClientSecurity {
            protocol: SecurityProtocol::SaslSsl,
            username: Some(name.to_string()),
            ..ClientSecurity::default()
        }
    }

    fn refused(code: i16) -> anyhow::Error {
        ClientError::Kafka {
            code,
            topic: Some("orders".into()),
            partition: Some(0),
            message: None,
        }
        .into()
    }

    #[test]
    fn a_refused_write_names_the_topic_the_user_and_the_acl_that_allows_it() {
        let needs = Needs::new(&sasl_user("alice"), Operation::Write, "orders");
        let text = needs
            .explain(refused(codes::TOPIC_AUTHORIZATION_FAILED))
            .to_string();
        assert_eq!(
            text,
            "not authorized to write to topic orders as User:alice \
             (orders/0: TopicAuthorizationFailed (Kafka error 29)); an administrator can allow \
             it with `strata acls add --allow-principal User:alice --operation write --topic orders`"
        );
    }

    #[test]
    fn a_refused_join_names_the_group() {
        let needs =
            Needs::new(&sasl_user("bob"), Operation::Read, "orders").in_group(Some("billing"));
        let error = needs.explain(refused(codes::GROUP_AUTHORIZATION_FAILED));
        let refusal = error.downcast_ref::<NotAuthorized>().expect("typed");
        assert_eq!(refusal.resource, Resource::Group("billing".into()));
        assert_eq!(refusal.operation, Operation::Read);
        assert!(
            error
                .to_string()
                .contains("--operation read --group billing")
        );
    }

    #[test]
    fn a_refusal_on_the_cluster_names_the_cluster_flag() {
        let needs = Needs::cluster(&sasl_user("carol"), Operation::Alter);
        let text = needs
            .explain(ClientError::kafka(
                codes::CLUSTER_AUTHORIZATION_FAILED,
                None,
                None,
            ))
            .to_string();
        assert!(
            text.starts_with("not authorized to alter the cluster as User:carol"),
            "{text}"
        );
        assert!(text.ends_with("--operation alter --cluster`"), "{text}");
    }

    #[test]
    fn an_operation_is_named_as_the_acls_flag_takes_it() {
        let needs = Needs::new(&sasl_user("erin"), Operation::DescribeConfigs, "orders");
        let text = needs
            .explain(refused(codes::TOPIC_AUTHORIZATION_FAILED))
            .to_string();
        assert!(
            text.starts_with("not authorized to describe-configs topic orders"),
            "{text}"
        );
        assert!(
            text.contains("--operation describe-configs --topic orders`"),
            "{text}"
        );
        for operation in Operation::ALL {
            assert_eq!(Operation::parse(&flag(operation)), Ok(operation));
        }
    }

    #[test]
    fn other_errors_pass_unchanged() {
        let needs = Needs::new(&ClientSecurity::default(), Operation::Read, "orders");
        let error = needs.explain(refused(codes::UNKNOWN_TOPIC_OR_PARTITION));
        assert!(error.downcast_ref::<NotAuthorized>().is_none());
        let error = needs.explain(anyhow::anyhow!("no such file"));
        assert_eq!(error.to_string(), "no such file");
        // A group refusal of a command that joins no group names no group.
        let error = needs.explain(refused(codes::GROUP_AUTHORIZATION_FAILED));
        assert!(error.downcast_ref::<NotAuthorized>().is_none());
    }

    #[test]
    fn a_certificates_subject_is_the_principal_quoted_for_the_shell() {
        let dir = tempfile::tempdir().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "app");
        let key = rcgen::KeyPair::generate().unwrap();
        let path = dir.path().join("app.pem");
        std::fs::write(&path, params.self_signed(&key).unwrap().pem()).unwrap();
        let security = ClientSecurity {
            protocol: SecurityProtocol::Ssl,
            certificate_location: Some(path),
            ..ClientSecurity::default()
        };
        let text = Needs::new(&security, Operation::Write, "orders")
            .explain(refused(codes::TOPIC_AUTHORIZATION_FAILED))
            .to_string();
        assert!(text.contains("as User:CN=app,O=Example ("), "{text}");
        assert!(
            text.contains("--allow-principal 'User:CN=app,O=Example' --operation write"),
            "{text}"
        );
    }
}
