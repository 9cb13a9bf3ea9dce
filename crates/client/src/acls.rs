//! ACLs through [`Admin`]: CreateAcls, DescribeAcls and DeleteAcls, with
//! the broker's model types (`broker::acl`) on both sides, against strata
//! or any Kafka cluster.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ClientError};
use strata_protocol::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, Operation, PatternType, Permission,
    ResourcePattern, ResourceType,
};
use strata_protocol::principal::Principal;

/// Newest versions of the ACL APIs this client sends.
const DESCRIBE_ACLS_VERSION_MAX: i16 = 3;
const CREATE_ACLS_VERSION_MAX: i16 = 3;
const DELETE_ACLS_VERSION_MAX: i16 = 3;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// An error code (and message) of an ACL answer as an error.
fn check(code: i16, message: Option<&StrBytes>) -> Result<(), ClientError> {
    if code == 0 {
        return Ok(());
    }
    Err(ClientError::kafka(code, None, None).with_message(message.map(|m| m.as_str())))
}

/// A binding the broker described, each code one this client knows.
#[expect(
    clippy::too_many_arguments,
    reason = "the eight wire fields of one ACL"
)]
fn binding_of(
    resource_type: i8,
    name: &StrBytes,
    pattern_type: i8,
    principal: &StrBytes,
    host: &StrBytes,
    operation: i8,
    permission: i8,
    api: &str,
) -> Result<AclBinding, ClientError> {
    let unknown = |what: &str, code: i8| {
        ClientError::Protocol(format!("{api} answered an unknown {what} code {code}"))
    };
    Ok(AclBinding {
        pattern: ResourcePattern::new(
            ResourceType::from_code(resource_type)
                .ok_or_else(|| unknown("resource type", resource_type))?,
            name.as_str(),
            PatternType::from_code(pattern_type)
                .ok_or_else(|| unknown("pattern type", pattern_type))?,
        ),
        entry: AccessControlEntry {
            principal: Principal::parse(principal.as_str())
                .map_err(|e| ClientError::Protocol(format!("{api} answered {e}")))?,
            host: host.as_str().to_string(),
            operation: Operation::from_code(operation)
                .ok_or_else(|| unknown("operation", operation))?,
            permission: Permission::from_code(permission)
                .ok_or_else(|| unknown("permission", permission))?,
        },
    })
}

impl Admin {
    /// Creates `bindings` (an ACL already there is no change). The first
    /// refusal is the error (INVALID_REQUEST for a binding that cannot be
    /// stored, CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster);
    /// the broker still makes the others.
    pub async fn create_acls(&self, bindings: &[AclBinding]) -> Result<(), ClientError> {
        let connection = self.cluster().any_connection().await?;
        let request = CreateAclsRequest::default().with_creations(
            bindings
                .iter()
                .map(|b| {
                    AclCreation::default()
                        .with_resource_type(b.pattern.resource_type.code())
                        .with_resource_name(s(&b.pattern.name))
                        .with_resource_pattern_type(b.pattern.pattern_type.code())
                        .with_principal(s(&b.entry.principal.to_string()))
                        .with_host(s(&b.entry.host))
                        .with_operation(b.entry.operation.code())
                        .with_permission_type(b.entry.permission.code())
                })
                .collect(),
        );
        let response = connection.send(&request, CREATE_ACLS_VERSION_MAX).await?;
        if response.results.len() != bindings.len() {
            return Err(ClientError::Protocol(format!(
                "CreateAcls answered {} results for {} ACLs",
                response.results.len(),
                bindings.len()
            )));
        }
        for result in &response.results {
            check(result.error_code, result.error_message.as_ref())?;
        }
        Ok(())
    }

    /// The ACLs `filter` matches.
    pub async fn describe_acls(
        &self,
        filter: &AclBindingFilter,
    ) -> Result<Vec<AclBinding>, ClientError> {
        let connection = self.cluster().any_connection().await?;
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.pattern.resource_type.code())
            .with_resource_name_filter(filter.pattern.name.as_deref().map(s))
            .with_pattern_type_filter(filter.pattern.pattern_type.code())
            .with_principal_filter(filter.entry.principal.as_deref().map(s))
            .with_host_filter(filter.entry.host.as_deref().map(s))
            .with_operation(filter.entry.operation.code())
            .with_permission_type(filter.entry.permission.code());
        let response = connection.send(&request, DESCRIBE_ACLS_VERSION_MAX).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let mut found = Vec::new();
        for resource in &response.resources {
            for acl in &resource.acls {
                found.push(binding_of(
                    resource.resource_type,
                    &resource.resource_name,
                    resource.pattern_type,
                    &acl.principal,
                    &acl.host,
                    acl.operation,
                    acl.permission_type,
                    "DescribeAcls",
                )?);
            }
        }
        Ok(found)
    }

    /// Deletes every ACL any of `filters` matches; returns them (once each).
    pub async fn delete_acls(
        &self,
        filters: &[AclBindingFilter],
    ) -> Result<Vec<AclBinding>, ClientError> {
        let connection = self.cluster().any_connection().await?;
        let request = DeleteAclsRequest::default().with_filters(
            filters
                .iter()
                .map(|f| {
                    DeleteAclsFilter::default()
                        .with_resource_type_filter(f.pattern.resource_type.code())
                        .with_resource_name_filter(f.pattern.name.as_deref().map(s))
                        .with_pattern_type_filter(f.pattern.pattern_type.code())
                        .with_principal_filter(f.entry.principal.as_deref().map(s))
                        .with_host_filter(f.entry.host.as_deref().map(s))
                        .with_operation(f.entry.operation.code())
                        .with_permission_type(f.entry.permission.code())
                })
                .collect(),
        );
        let response = connection.send(&request, DELETE_ACLS_VERSION_MAX).await?;
        let mut deleted = Vec::new();
        for result in &response.filter_results {
            check(result.error_code, result.error_message.as_ref())?;
            for acl in &result.matching_acls {
                check(acl.error_code, acl.error_message.as_ref())?;
                let binding = binding_of(
                    acl.resource_type,
                    &acl.resource_name,
                    acl.pattern_type,
                    &acl.principal,
                    &acl.host,
                    acl.operation,
                    acl.permission_type,
                    "DeleteAcls",
                )?;
                if !deleted.contains(&binding) {
                    deleted.push(binding);
                }
            }
        }
        Ok(deleted)
    }
}
