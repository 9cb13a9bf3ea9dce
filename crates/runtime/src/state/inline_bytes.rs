//! [`InlineBytes`]: a byte string kept inside its owner up to
//! [`INLINE_MAX`] bytes, on the heap beyond. A task's state lists the keys
//! a run wrote with it: store keys are mostly short, so a run's list needs
//! no heap block per key.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Longest byte string held inline (the type is 24 bytes, like a `Vec`).
pub const INLINE_MAX: usize = 22;

#[derive(Clone)]
pub enum InlineBytes {
    Inline { len: u8, bytes: [u8; INLINE_MAX] },
    Heap(Box<[u8]>),
}

impl InlineBytes {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Heap(bytes) => bytes,
        }
    }
}

impl From<&[u8]> for InlineBytes {
    fn from(slice: &[u8]) -> Self {
        if slice.len() <= INLINE_MAX {
            let mut bytes = [0; INLINE_MAX];
            bytes[..slice.len()].copy_from_slice(slice);
            Self::Inline {
                len: slice.len() as u8,
                bytes,
            }
        } else {
            Self::Heap(slice.into())
        }
    }
}

impl std::ops::Deref for InlineBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Hashed, compared and ordered as the byte slice, so a map keyed by it is
/// looked up with a `&[u8]`.
impl Borrow<[u8]> for InlineBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Hash for InlineBytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq for InlineBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for InlineBytes {}

impl PartialOrd for InlineBytes {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InlineBytes {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl std::fmt::Debug for InlineBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn short_and_long_strings_behave_as_their_bytes() {
        assert_eq!(std::mem::size_of::<InlineBytes>(), 24);
        assert_eq!(std::mem::size_of::<Option<InlineBytes>>(), 24);
        let short: &[u8] = b"key-000123";
        let edge = [7u8; INLINE_MAX];
        let long = [9u8; INLINE_MAX + 1];
        for bytes in [&b""[..], short, &edge, &long] {
            let held = InlineBytes::from(bytes);
            assert_eq!(&*held, bytes);
            assert_eq!(held.clone(), held);
        }
        assert!(matches!(
            InlineBytes::from(&edge[..]),
            InlineBytes::Inline { .. }
        ));
        assert!(matches!(InlineBytes::from(&long[..]), InlineBytes::Heap(_)));
        let mut sorted = [
            InlineBytes::from(&long[..]),
            InlineBytes::from(short),
            InlineBytes::from(&b"a"[..]),
        ];
        sorted.sort();
        assert_eq!(&*sorted[0], &long, "byte order: 9 < 'a' < 'k'");
        assert_eq!(&*sorted[1], b"a");
        assert_eq!(&*sorted[2], short);

        let mut map = HashMap::new();
        map.insert(InlineBytes::from(short), 1);
        map.insert(InlineBytes::from(&long[..]), 2);
        assert_eq!(map.get(short), Some(&1));
        assert_eq!(map.get(&long[..]), Some(&2));
        assert_eq!(map.get(&b"other"[..]), None);
    }
}
