//! Which resources an ACL covers: a type and a name, taken literally (the
//! name `*` covering every resource of the type) or as a prefix.

use std::fmt;

use super::resource::{Resource, ResourceType, WILDCARD_RESOURCE};

/// Kafka's pattern types, with their wire codes. An ACL is LITERAL or
/// PREFIXED; ANY and MATCH appear only in filters (see
/// [`PatternFilter`](super::PatternFilter)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i8)]
pub enum PatternType {
    Any = 1,
    Match = 2,
    Literal = 3,
    Prefixed = 4,
}

impl PatternType {
    pub const ALL: [Self; 4] = [Self::Any, Self::Match, Self::Literal, Self::Prefixed];

    pub fn code(self) -> i8 {
        self as i8
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "ANY",
            Self::Match => "MATCH",
            Self::Literal => "LITERAL",
            Self::Prefixed => "PREFIXED",
        }
    }

    /// Kafka's name in any case (`literal`, `PREFIXED`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let wanted = super::normalized(text);
        Self::ALL
            .into_iter()
            .find(|t| super::normalized(t.name()) == wanted)
            .ok_or_else(|| {
                format!("unknown pattern type {text:?}: use literal, prefixed, any or match")
            })
    }
}

impl fmt::Display for PatternType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The resources one ACL covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    pub fn new(
        resource_type: ResourceType,
        name: impl Into<String>,
        pattern_type: PatternType,
    ) -> Self {
        Self {
            resource_type,
            name: name.into(),
            pattern_type,
        }
    }

    /// Whether this pattern covers `resource`: the same type, and the same
    /// name (LITERAL), any name (LITERAL `*`) or a name starting with this
    /// one (PREFIXED).
    pub fn covers(&self, resource: &Resource<'_>) -> bool {
        if self.resource_type != resource.resource_type {
            return false;
        }
        match self.pattern_type {
            PatternType::Literal => self.name == resource.name || self.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => resource.name.starts_with(self.name.as_str()),
            PatternType::Any | PatternType::Match => false,
        }
    }
}

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} ({})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_pattern_covers_its_name_and_the_wildcard_covers_every_name() {
        let orders = ResourcePattern::new(ResourceType::Topic, "orders", PatternType::Literal);
        assert!(orders.covers(&Resource::topic("orders")));
        assert!(!orders.covers(&Resource::topic("orders-eu")));
        assert!(!orders.covers(&Resource::group("orders")));
        let every = ResourcePattern::new(ResourceType::Topic, "*", PatternType::Literal);
        assert!(every.covers(&Resource::topic("anything")));
        assert!(!every.covers(&Resource::group("anything")));
    }

    #[test]
    fn a_prefixed_pattern_covers_names_that_start_with_it() {
        let prefix = ResourcePattern::new(ResourceType::Group, "app-", PatternType::Prefixed);
        assert!(prefix.covers(&Resource::group("app-")));
        assert!(prefix.covers(&Resource::group("app-1")));
        assert!(!prefix.covers(&Resource::group("app")));
        // A prefixed `*` is a prefix like any other, not a wildcard.
        let star = ResourcePattern::new(ResourceType::Group, "*", PatternType::Prefixed);
        assert!(!star.covers(&Resource::group("app")));
        assert!(star.covers(&Resource::group("*app")));
    }

    #[test]
    fn pattern_types_round_trip_their_codes_and_names() {
        for t in PatternType::ALL {
            assert_eq!(PatternType::from_code(t.code()), Some(t));
            assert_eq!(PatternType::parse(&t.name().to_lowercase()).unwrap(), t);
        }
        assert_eq!(PatternType::from_code(0), None);
        assert!(PatternType::parse("regex").is_err());
    }
}
