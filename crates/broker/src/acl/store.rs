//! The broker's ACLs on disk: `<data_dir>/security/acls.json`, one JSON
//! document holding every ACL under Kafka's names:
//!
//! ```json
//! {"version": 1, "acls": [
//!   {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
//!    "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}
//! ]}
//! ```
//!
//! Crash policy: every change writes the whole file anew through
//! [`Disk::replace_durably`] (a temporary file, fsynced, renamed over the
//! old one, the directory fsynced), and is answered only after that, so
//! after a crash the file holds every acknowledged change and is the old or
//! the new version, never a mix. A temporary file a crash leaves is
//! overwritten by the next change. The `security` directory is made with
//! the first ACL (its name made durable in the data directory); a broker
//! that never had an ACL has no file and starts with none.
//!
//! A file that is not valid ACLs stops the broker from starting, naming the
//! file: serving without its DENY entries would grant what they refuse.
//!
//! Thread-safety: changes are serialized by a lock held across the write;
//! readers take the current [`AclSet`] (an `Arc`, swapped in once the
//! write is durable) and never wait for the disk.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

use super::acl_set::AclSet;
use super::error::AclError;
use crate::auth::Principal;
use strata_log::LogError;
use strata_log::storage::Disk;
use strata_protocol::acl::AclBinding;
use strata_protocol::acl::AclBindingFilter;
use strata_protocol::acl::Operation;
use strata_protocol::acl::ResourceType;
use strata_protocol::acl::{AccessControlEntry, Permission};
use strata_protocol::acl::{PatternType, ResourcePattern};

use crate::auth::SECURITY_DIR;

/// The ACL file, inside [`SECURITY_DIR`].
pub const ACLS_FILE: &str = "acls.json";
/// Where a new version is written before it is renamed over the file.
const ACLS_TMP_FILE: &str = "acls.json.tmp";
/// The file format's version; another is refused, not guessed at.
const FORMAT_VERSION: u32 = 1;
/// Most ACLs the broker keeps. Every change rewrites the file and rebuilds
/// the index, so this bounds the cost of a change as well as memory.
pub const ACLS_MAX: usize = 100_000;
/// Largest ACL file read or written; a change that would write a larger
/// one is refused, so what is written can always be read back.
const ACLS_FILE_BYTES_MAX: usize = 256 << 20;

/// The file's layout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AclFile {
    version: u32,
    acls: Vec<StoredAcl>,
}

/// One ACL as the file holds it: Kafka's names, the principal as
/// `Kind:name`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredAcl {
    resource_type: String,
    resource_name: String,
    pattern_type: String,
    principal: String,
    host: String,
    operation: String,
    permission: String,
}

impl From<&AclBinding> for StoredAcl {
    fn from(binding: &AclBinding) -> Self {
        Self {
            resource_type: binding.pattern.resource_type.name().into(),
            resource_name: binding.pattern.name.clone(),
            pattern_type: binding.pattern.pattern_type.name().into(),
            principal: binding.entry.principal.to_string(),
            host: binding.entry.host.clone(),
            operation: binding.entry.operation.name().into(),
            permission: binding.entry.permission.name().into(),
        }
    }
}

impl StoredAcl {
    /// The binding, checked as a CreateAcls would check it.
    fn binding(&self) -> Result<AclBinding, String> {
        fn named<T: Copy>(
            all: &[T],
            name: fn(T) -> &'static str,
            text: &str,
            what: &str,
        ) -> Result<T, String> {
            all.iter()
                .copied()
                .find(|item| name(*item) == text)
                .ok_or_else(|| format!("unknown {what} {text:?}"))
        }
        let binding = AclBinding {
            pattern: ResourcePattern::new(
                named(
                    &ResourceType::ALL,
                    ResourceType::name,
                    &self.resource_type,
                    "resource type",
                )?,
                self.resource_name.clone(),
                named(
                    &PatternType::ALL,
                    PatternType::name,
                    &self.pattern_type,
                    "pattern type",
                )?,
            ),
            entry: AccessControlEntry {
                principal: Principal::parse(&self.principal)?,
                host: self.host.clone(),
                operation: named(
                    &Operation::ALL,
                    Operation::name,
                    &self.operation,
                    "operation",
                )?,
                permission: named(
                    &Permission::ALL,
                    Permission::name,
                    &self.permission,
                    "permission",
                )?,
            },
        };
        binding.check().map_err(|e| e.to_string())?;
        Ok(binding)
    }
}

/// The broker's ACLs: durable on disk, current in memory.
#[derive(Debug)]
pub struct AclStore {
    disk: Disk,
    data_dir: PathBuf,
    /// What authorization reads; replaced whole once a change is durable.
    current: RwLock<Arc<AclSet>>,
    /// Held by a change from reading the current set to swapping in the
    /// new one, across the file write; authorization never takes it.
    changes: Mutex<()>,
}

impl AclStore {
    /// Reads the ACL file of `data_dir` (none: no ACLs).
    pub fn open(disk: &Disk, data_dir: &Path) -> Result<Self, AclError> {
        let path = data_dir.join(SECURITY_DIR).join(ACLS_FILE);
        let acls = if path.exists() {
            load(&path)?
        } else {
            AclSet::default()
        };
        Ok(Self {
            disk: disk.clone(),
            data_dir: data_dir.to_path_buf(),
            current: RwLock::new(Arc::new(acls)),
            changes: Mutex::new(()),
        })
    }

    /// The ACLs now. Cheap: a reference count, taken under a lock only ever
    /// held to swap a pointer.
    pub fn snapshot(&self) -> Arc<AclSet> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Adds `bindings` (ACLs already there are no change), durably, all or
    /// none. Each must have passed [`AclBinding::check`].
    pub fn create(&self, bindings: Vec<AclBinding>) -> Result<(), AclError> {
        for binding in &bindings {
            binding.check()?;
        }
        let _change = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        let before = self.snapshot();
        if bindings.iter().all(|b| before.contains(b)) {
            return Ok(());
        }
        let after = before.with(bindings);
        if after.len() > ACLS_MAX {
            return Err(AclError::TooMany { max: ACLS_MAX });
        }
        self.install(after)
    }

    /// Removes every ACL any of `filters` matches, durably; returns, per
    /// filter, the ACLs it matched (one removed ACL is listed under every
    /// filter that matched it, as Kafka lists it).
    pub fn delete(&self, filters: &[AclBindingFilter]) -> Result<Vec<Vec<AclBinding>>, AclError> {
        let _change = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        let before = self.snapshot();
        let matched: Vec<Vec<AclBinding>> = filters.iter().map(|f| before.matching(f)).collect();
        let removed: BTreeSet<AclBinding> = matched.iter().flatten().cloned().collect();
        if !removed.is_empty() {
            self.install(before.without(&removed))?;
        }
        Ok(matched)
    }

    /// Writes `acls` durably, then makes it the current set. Called with
    /// the change lock held.
    fn install(&self, acls: AclSet) -> Result<(), AclError> {
        let file = AclFile {
            version: FORMAT_VERSION,
            acls: acls.iter().map(StoredAcl::from).collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("ACLs serialize");
        if bytes.len() > ACLS_FILE_BYTES_MAX {
            return Err(AclError::TooLarge {
                bytes: bytes.len(),
                max: ACLS_FILE_BYTES_MAX,
            });
        }
        let dir = crate::auth::security_dir(&self.disk, &self.data_dir)?;
        self.disk
            .replace_durably(&dir.join(ACLS_FILE), &dir.join(ACLS_TMP_FILE), &bytes)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(acls);
        Ok(())
    }
}

/// Reads and checks the ACL file at `path`.
fn load(path: &Path) -> Result<AclSet, AclError> {
    let corrupt = |reason: String| AclError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let file: AclFile = strata_log::files::read_json(path, ACLS_FILE_BYTES_MAX as u64).map_err(
        |error| match error {
            LogError::BadMetadata { reason, .. } => corrupt(reason),
            other => corrupt(other.to_string()),
        },
    )?;
    if file.version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "format version {} is not {FORMAT_VERSION}, the one this broker reads",
            file.version
        )));
    }
    if file.acls.len() > ACLS_MAX {
        return Err(corrupt(format!(
            "{} ACLs, more than the limit of {ACLS_MAX}",
            file.acls.len()
        )));
    }
    let bindings = file
        .acls
        .iter()
        .enumerate()
        .map(|(i, stored)| {
            stored
                .binding()
                .map_err(|reason| corrupt(format!("ACL {i}: {reason}")))
        })
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(AclSet::new(bindings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_log::storage::PowerLoss;

    fn binding(topic: &str, user: &str, permission: Permission) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern::new(ResourceType::Topic, topic, PatternType::Literal),
            entry: AccessControlEntry {
                principal: Principal::user(user),
                host: "*".into(),
                operation: Operation::Write,
                permission,
            },
        }
    }

    #[test]
    fn created_acls_are_read_back_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = AclStore::open(&Disk::os(), dir.path()).unwrap();
        assert!(store.snapshot().is_empty());
        assert!(
            !dir.path().join(SECURITY_DIR).exists(),
            "nothing written before the first ACL"
        );
        let deny = binding("orders", "mallory", Permission::Deny);
        let allow = binding("orders", "alice", Permission::Allow);
        store.create(vec![deny.clone(), allow.clone()]).unwrap();
        store.create(vec![deny.clone()]).unwrap();
        let again = AclStore::open(&Disk::os(), dir.path()).unwrap();
        let listed: Vec<AclBinding> = again.snapshot().iter().cloned().collect();
        assert_eq!(listed.len(), 2);
        assert!(listed.contains(&deny) && listed.contains(&allow));
    }

    #[test]
    fn delete_removes_what_each_filter_matches_and_reports_it_per_filter() {
        let dir = tempfile::tempdir().unwrap();
        let store = AclStore::open(&Disk::os(), dir.path()).unwrap();
        let a = binding("a", "alice", Permission::Allow);
        let b = binding("b", "alice", Permission::Deny);
        store.create(vec![a.clone(), b.clone()]).unwrap();
        let mut denies = AclBindingFilter::any();
        denies.entry.permission = Permission::Deny;
        let matched = store
            .delete(&[
                denies,
                AclBindingFilter::exactly(&b),
                AclBindingFilter::exactly(&binding("c", "x", Permission::Allow)),
            ])
            .unwrap();
        assert_eq!(matched, [vec![b.clone()], vec![b.clone()], vec![]]);
        let left: Vec<AclBinding> = AclStore::open(&Disk::os(), dir.path())
            .unwrap()
            .snapshot()
            .iter()
            .cloned()
            .collect();
        assert_eq!(left, [a]);
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it_never_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let security = dir.path().join(SECURITY_DIR);
        std::fs::create_dir_all(&security).unwrap();
        let path = security.join(ACLS_FILE);
        let good = r#"{"resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL",
            "principal": "User:a", "host": "*", "operation": "READ", "permission": "ALLOW"}"#;
        for bad in [
            "{".to_string(),
            "[]".to_string(),
            String::from_utf8_lossy(&[0xff, 0xfe, 0x00]).into_owned(),
            format!(r#"{{"version": 2, "acls": [{good}]}}"#),
            format!(
                r#"{{"version": 1, "acls": [{}]}}"#,
                good.replace("TOPIC", "QUEUE")
            ),
            format!(
                r#"{{"version": 1, "acls": [{}]}}"#,
                good.replace("LITERAL", "MATCH")
            ),
            format!(
                r#"{{"version": 1, "acls": [{}]}}"#,
                good.replace("User:a", "alice")
            ),
            format!(
                r#"{{"version": 1, "acls": [{}]}}"#,
                good.replace(r#""t""#, r#""""#)
            ),
        ] {
            std::fs::write(&path, &bad).unwrap();
            let error = AclStore::open(&Disk::os(), dir.path()).unwrap_err();
            assert!(matches!(error, AclError::Corrupt { .. }), "{bad}: {error}");
            assert!(error.to_string().contains("acls.json"), "{error}");
        }
        std::fs::write(&path, format!(r#"{{"version": 1, "acls": [{good}]}}"#)).unwrap();
        assert_eq!(
            AclStore::open(&Disk::os(), dir.path())
                .unwrap()
                .snapshot()
                .len(),
            1
        );
    }

    #[test]
    fn a_power_loss_during_a_change_leaves_the_old_or_the_new_acls_and_never_loses_an_acknowledged_one()
     {
        for seed in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let power = Arc::new(PowerLoss::new(dir.path()).unwrap());
            let disk = Disk::new(Arc::clone(&power) as Arc<dyn strata_log::storage::Storage>);
            let store = AclStore::open(&disk, dir.path()).unwrap();
            let first = binding("a", "alice", Permission::Allow);
            store.create(vec![first.clone()]).unwrap();
            // The power goes off at one of the second change's storage calls,
            // or after it.
            power.cut_after(seed % 8);
            let second = binding("b", "bob", Permission::Deny);
            let acknowledged = store.create(vec![second.clone()]).is_ok();
            power.cut();
            drop(store);
            power.restore(seed).unwrap();
            let after = AclStore::open(&Disk::os(), dir.path())
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"))
                .snapshot();
            assert!(after.contains(&first), "seed {seed}");
            if acknowledged {
                assert!(after.contains(&second), "seed {seed}");
            }
            assert!(after.len() <= 2, "seed {seed}");
        }
    }
}
