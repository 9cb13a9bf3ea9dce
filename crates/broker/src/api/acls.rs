//! DescribeAcls, CreateAcls and DeleteAcls: the broker's ACLs managed over
//! the wire, as Kafka's AdminClient and `kafka-acls` manage them.
//!
//! Listing needs DESCRIBE on the cluster, changing ALTER on the cluster;
//! without it DescribeAcls answers CLUSTER_AUTHORIZATION_FAILED, and every
//! creation or filter of the others does. A binding that cannot be stored
//! (ANY or MATCH, an unknown code, an empty name, a cluster not named
//! `kafka-cluster`) or a filter with an unknown code is INVALID_REQUEST,
//! with a message saying what is wrong; the valid creations of the same
//! request are made. A change is answered once it is on disk.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclError, EntryFilter, Operation,
    PatternFilter, PatternType, Permission, Resource, ResourcePattern, ResourceType,
};
use crate::auth::{Caller, Principal};

pub(super) fn describe_acls(
    ctx: &BrokerContext,
    request: &DescribeAclsRequest,
    caller: &Caller,
) -> DescribeAclsResponse {
    if !ctx
        .acls
        .authorize(caller, Operation::Describe, Resource::cluster())
    {
        return DescribeAclsResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
            .with_error_message(Some(not_allowed(caller, "DESCRIBE")));
    }
    let filter = match filter_of(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    ) {
        Ok(filter) => filter,
        Err(error) => {
            return DescribeAclsResponse::default()
                .with_error_code(ErrorCode::InvalidRequest.code())
                .with_error_message(Some(StrBytes::from_string(error.to_string())));
        }
    };
    // One resource entry per pattern, its ACLs under it, as Kafka groups them.
    let mut by_pattern: BTreeMap<ResourcePattern, Vec<AccessControlEntry>> = BTreeMap::new();
    for binding in ctx.acls.snapshot().matching(&filter) {
        by_pattern
            .entry(binding.pattern)
            .or_default()
            .push(binding.entry);
    }
    let resources = by_pattern
        .into_iter()
        .map(|(pattern, entries)| {
            DescribeAclsResource::default()
                .with_resource_type(pattern.resource_type.code())
                .with_resource_name(StrBytes::from_string(pattern.name))
                .with_pattern_type(pattern.pattern_type.code())
                .with_acls(
                    entries
                        .into_iter()
                        .map(|entry| {
                            AclDescription::default()
                                .with_principal(StrBytes::from_string(entry.principal.to_string()))
                                .with_host(StrBytes::from_string(entry.host))
                                .with_operation(entry.operation.code())
                                .with_permission_type(entry.permission.code())
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeAclsResponse::default()
        .with_error_message(None)
        .with_resources(resources)
}

pub(super) fn create_acls(
    ctx: &BrokerContext,
    request: &CreateAclsRequest,
    caller: &Caller,
) -> CreateAclsResponse {
    if !ctx
        .acls
        .authorize(caller, Operation::Alter, Resource::cluster())
    {
        let refused = AclCreationResult::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
            .with_error_message(Some(not_allowed(caller, "ALTER")));
        return CreateAclsResponse::default().with_results(vec![refused; request.creations.len()]);
    }
    let checked: Vec<Result<AclBinding, Failure>> = request
        .creations
        .iter()
        .map(|creation| {
            let binding = binding_of(creation)?;
            binding.check()?;
            Ok(binding)
        })
        .map(|checked| checked.map_err(|e: AclError| Failure::of(&e)))
        .collect();
    let valid: Vec<AclBinding> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        ctx.acls.store().create(valid).map_err(|error| {
            tracing::warn!("creating ACLs failed: {error}");
            Failure::of(&error)
        })
    };
    let results = checked
        .into_iter()
        .map(|checked| match checked.and_then(|_| stored.clone()) {
            Ok(()) => AclCreationResult::default().with_error_message(None),
            Err(failure) => AclCreationResult::default()
                .with_error_code(failure.code.code())
                .with_error_message(Some(failure.message)),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub(super) fn delete_acls(
    ctx: &BrokerContext,
    request: &DeleteAclsRequest,
    caller: &Caller,
) -> DeleteAclsResponse {
    if !ctx
        .acls
        .authorize(caller, Operation::Alter, Resource::cluster())
    {
        let refused = DeleteAclsFilterResult::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
            .with_error_message(Some(not_allowed(caller, "ALTER")));
        return DeleteAclsResponse::default()
            .with_filter_results(vec![refused; request.filters.len()]);
    }
    let filters: Vec<Result<AclBindingFilter, Failure>> = request
        .filters
        .iter()
        .map(|f| {
            filter_of(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
            .map_err(|e| Failure::of(&e))
        })
        .collect();
    let valid: Vec<AclBindingFilter> = filters
        .iter()
        .filter_map(|f| f.as_ref().ok())
        .cloned()
        .collect();
    let deleted = ctx.acls.store().delete(&valid).map_err(|error| {
        tracing::warn!("deleting ACLs failed: {error}");
        Failure::of(&error)
    });
    // One list per valid filter, in order.
    let mut matched = deleted.clone().unwrap_or_default().into_iter();
    let results = filters
        .into_iter()
        .map(|filter| {
            let outcome = filter.and_then(|_| {
                deleted
                    .as_ref()
                    .map(|_| matched.next().unwrap_or_default())
                    .map_err(Failure::clone)
            });
            match outcome {
                Ok(bindings) => DeleteAclsFilterResult::default()
                    .with_error_message(None)
                    .with_matching_acls(bindings.into_iter().map(matching_acl).collect()),
                Err(failure) => DeleteAclsFilterResult::default()
                    .with_error_code(failure.code.code())
                    .with_error_message(Some(failure.message)),
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

fn matching_acl(binding: AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_error_message(None)
        .with_resource_type(binding.pattern.resource_type.code())
        .with_resource_name(StrBytes::from_string(binding.pattern.name))
        .with_pattern_type(binding.pattern.pattern_type.code())
        .with_principal(StrBytes::from_string(binding.entry.principal.to_string()))
        .with_host(StrBytes::from_string(binding.entry.host))
        .with_operation(binding.entry.operation.code())
        .with_permission_type(binding.entry.permission.code())
}

/// The message of a refusal: who was refused what.
fn not_allowed(caller: &Caller, operation: &str) -> StrBytes {
    StrBytes::from_string(format!(
        "{} is not allowed {operation} on the cluster",
        caller.principal
    ))
}

/// Why a creation or a filter failed, as its answer carries it.
#[derive(Debug, Clone)]
struct Failure {
    code: ErrorCode,
    message: StrBytes,
}

impl Failure {
    fn of(error: &AclError) -> Self {
        let code = match error {
            AclError::Invalid(_) => ErrorCode::InvalidRequest,
            AclError::TooMany { .. } | AclError::TooLarge { .. } => ErrorCode::PolicyViolation,
            AclError::Corrupt { .. } | AclError::Storage(_) => ErrorCode::UnknownServerError,
        };
        Self {
            code,
            message: StrBytes::from_string(error.to_string()),
        }
    }
}

/// A creation's binding, each code known (its checks come after).
fn binding_of(creation: &AclCreation) -> Result<AclBinding, AclError> {
    Ok(AclBinding {
        pattern: ResourcePattern::new(
            known(
                ResourceType::from_code(creation.resource_type),
                "resource type",
                creation.resource_type,
            )?,
            creation.resource_name.as_str(),
            known(
                PatternType::from_code(creation.resource_pattern_type),
                "pattern type",
                creation.resource_pattern_type,
            )?,
        ),
        entry: AccessControlEntry {
            principal: Principal::parse(creation.principal.as_str()).map_err(AclError::Invalid)?,
            host: creation.host.as_str().to_string(),
            operation: known(
                Operation::from_code(creation.operation),
                "operation",
                creation.operation,
            )?,
            permission: known(
                Permission::from_code(creation.permission_type),
                "permission",
                creation.permission_type,
            )?,
        },
    })
}

/// A filter from its wire fields, each code known.
fn filter_of(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclBindingFilter, AclError> {
    let text = |s: Option<&StrBytes>| s.map(|s| s.as_str().to_string());
    Ok(AclBindingFilter {
        pattern: PatternFilter {
            resource_type: known(
                ResourceType::from_code(resource_type),
                "resource type",
                resource_type,
            )?,
            name: text(name),
            pattern_type: known(
                PatternType::from_code(pattern_type),
                "pattern type",
                pattern_type,
            )?,
        },
        entry: EntryFilter {
            principal: text(principal),
            host: text(host),
            operation: known(Operation::from_code(operation), "operation", operation)?,
            permission: known(Permission::from_code(permission), "permission", permission)?,
        },
    })
}

fn known<T>(value: Option<T>, what: &str, code: i8) -> Result<T, AclError> {
    value.ok_or_else(|| AclError::Invalid(format!("unknown {what} code {code}")))
}
