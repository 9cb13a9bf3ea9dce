//! CompatibilityLevel: which earlier versions a new schema is checked
//! against, and in which direction.
//!
//! BACKWARD: the new schema reads data written with the old (consumers
//! upgrade first). FORWARD: the old reads data written with the new
//! (producers upgrade first). FULL: both. The plain levels check against
//! the latest live version only; the `_TRANSITIVE` ones against every live
//! version. NONE checks nothing. BACKWARD is the default, as Confluent's.

use std::fmt;
use std::str::FromStr;

use crate::error::RegistryError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompatibilityLevel {
    #[default]
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
    None,
}

/// Who reads and who wrote in one check between the new schema and an
/// earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The new schema reads what the earlier one wrote.
    NewReadsOld,
    /// The earlier schema reads what the new one writes.
    OldReadsNew,
}

impl CompatibilityLevel {
    pub const ALL: [CompatibilityLevel; 7] = [
        Self::Backward,
        Self::BackwardTransitive,
        Self::Forward,
        Self::ForwardTransitive,
        Self::Full,
        Self::FullTransitive,
        Self::None,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Backward => "BACKWARD",
            Self::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Self::Forward => "FORWARD",
            Self::ForwardTransitive => "FORWARD_TRANSITIVE",
            Self::Full => "FULL",
            Self::FullTransitive => "FULL_TRANSITIVE",
            Self::None => "NONE",
        }
    }

    /// Whether every live version is checked, not only the latest.
    pub fn is_transitive(self) -> bool {
        matches!(
            self,
            Self::BackwardTransitive | Self::ForwardTransitive | Self::FullTransitive
        )
    }

    /// The checks one earlier version takes (none for NONE).
    pub fn directions(self) -> &'static [Direction] {
        match self {
            Self::Backward | Self::BackwardTransitive => &[Direction::NewReadsOld],
            Self::Forward | Self::ForwardTransitive => &[Direction::OldReadsNew],
            Self::Full | Self::FullTransitive => &[Direction::NewReadsOld, Direction::OldReadsNew],
            Self::None => &[],
        }
    }
}

impl FromStr for CompatibilityLevel {
    type Err = RegistryError;

    /// A level by its name, in any case (clients send them upper case).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|level| level.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| RegistryError::InvalidCompatibilityLevel(text.to_string()))
    }
}

impl fmt::Display for CompatibilityLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_reads_back_from_its_name() {
        for level in CompatibilityLevel::ALL {
            assert_eq!(level.name().parse::<CompatibilityLevel>().unwrap(), level);
            assert_eq!(
                level
                    .name()
                    .to_lowercase()
                    .parse::<CompatibilityLevel>()
                    .unwrap(),
                level
            );
        }
    }

    #[test]
    fn an_unknown_level_is_refused_with_42203() {
        let error = "SIDEWAYS".parse::<CompatibilityLevel>().unwrap_err();
        assert_eq!(error.code(), 42203);
    }

    #[test]
    fn full_checks_both_directions_and_none_checks_nothing() {
        assert_eq!(CompatibilityLevel::Full.directions().len(), 2);
        assert!(CompatibilityLevel::None.directions().is_empty());
        assert!(CompatibilityLevel::FullTransitive.is_transitive());
        assert!(!CompatibilityLevel::Backward.is_transitive());
    }
}
