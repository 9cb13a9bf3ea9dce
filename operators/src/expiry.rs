//! [`Expiry`]: the event-time clock of an operator whose state outlives
//! single records (de-duplication, stream–stream joins): the task's
//! watermark, kept with the state, and a time-ordered list of the entries
//! to delete once the watermark has passed them.
//!
//! An entry listed with `expires_at` is **live** while the watermark is at
//! or below `expires_at`; once the watermark passes it, the entry is
//! **expired** and the next scan hands it back to be deleted. Whether an
//! entry is live is decided from the watermark alone, at every record
//! (`is_live`), so what the operators decide never depends on when a
//! scan runs; a scan reclaims space, and hands back what expired (a
//! join emits its unjoined records then). Scans run once per `step_ms` of
//! watermark advance, not at every record: with the record that moves the
//! watermark into a step of its own (`watermark / step_ms`), so at the
//! same places in every run of the same records, restarts included.
//!
//! The list is a store whose keys sort by expiry, so the expired entries
//! are one range scan from its start:
//!
//! ```text
//! expiry key  [expires_at u64 BE: t ^ i64::MIN][the entry's key, as its operator lays it out]
//! ```
//!
//! The time store holds `watermark` (i64::MIN until a record is seen) and
//! counters the operator keeps (`late`, `duplicates`). Everything is
//! written through the task's run and committed with its offsets, so a
//! task restarted after a crash decides every replayed record as the
//! crash-free run did.

use strata_runtime::{Context, ProcessError, Store};

use crate::window::key::{time_bytes, time_of};

/// The time store's entry holding the watermark.
pub(crate) const WATERMARK: &str = "watermark";

const TIME: usize = 8;

/// The stores of an operator's clock.
#[derive(Clone, Copy)]
pub(crate) struct ExpiryStores {
    pub list: Store<Vec<u8>, ()>,
    pub time: Store<String, i64>,
}

pub(crate) struct Expiry {
    pub stores: ExpiryStores,
    /// Watermark advance between two scans of the list.
    step_ms: i64,
    /// i64::MIN until the task has seen a record.
    watermark: i64,
    /// The watermark of the last scan (i64::MIN for none yet): always in
    /// the watermark's step, scanned when the watermark moves into a step.
    scanned_at: i64,
}

/// The expiry key of `key` expiring at `expires_at`.
pub(crate) fn expiry_key(expires_at: i64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(TIME + key.len());
    out.extend_from_slice(&time_bytes(expires_at));
    out.extend_from_slice(key);
    out
}

/// The expiry time and entry key of an expiry key.
pub(crate) fn split_expiry_key(bytes: &[u8]) -> Result<(i64, &[u8]), String> {
    if bytes.len() < TIME {
        return Err(format!(
            "an expiry key of {} bytes is malformed",
            bytes.len()
        ));
    }
    Ok((time_of(&bytes[..TIME]), &bytes[TIME..]))
}

impl Expiry {
    pub fn new(stores: ExpiryStores, step_ms: i64) -> Self {
        Self {
            stores,
            step_ms: step_ms.max(1),
            watermark: i64::MIN,
            scanned_at: i64::MIN,
        }
    }

    /// Reads the watermark back (a restarted task resumes with it). The
    /// scan of its step was made with the record that moved the watermark
    /// there, in the same commit: scans go on at the same watermarks as
    /// in a run without the restart, so what they emit (a join's unjoined
    /// records) comes at the same places.
    pub fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.watermark = ctx.get(self.stores.time, WATERMARK)?.unwrap_or(i64::MIN);
        self.scanned_at = self.watermark;
        Ok(())
    }

    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// Moves the watermark up to `timestamp`.
    pub fn advance(&mut self, timestamp: i64, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        if timestamp > self.watermark {
            self.watermark = timestamp;
            ctx.put(self.stores.time, WATERMARK, &self.watermark)?;
        }
        Ok(())
    }

    /// Whether an entry expiring at `expires_at` is live.
    pub fn is_live(&self, expires_at: i64) -> bool {
        self.watermark <= expires_at
    }

    pub fn add(
        &self,
        expires_at: i64,
        key: &[u8],
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        ctx.put(self.stores.list, &expiry_key(expires_at, key), &())
    }

    pub fn remove(
        &self,
        expires_at: i64,
        key: &[u8],
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        ctx.delete(self.stores.list, &expiry_key(expires_at, key))
    }

    /// Adds one to the time store's counter `name`.
    pub fn count(&self, name: &str, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let n = ctx.get(self.stores.time, name)?.unwrap_or(0) + 1;
        ctx.put(self.stores.time, name, &n)
    }

    /// When a scan is due, the expired entries (expiry time and key, in
    /// expiry order), taken off the list: the caller deletes them.
    pub fn take_expired(
        &mut self,
        ctx: &mut Context<'_>,
    ) -> Result<Vec<(i64, Vec<u8>)>, ProcessError> {
        let step = self.step_ms;
        if self.watermark == i64::MIN
            || (self.scanned_at != i64::MIN
                && self.watermark.div_euclid(step) == self.scanned_at.div_euclid(step))
        {
            return Ok(Vec::new());
        }
        self.scanned_at = self.watermark;
        // Expired: expires_at < watermark, the keys below its time bytes.
        let upto = time_bytes(self.watermark).to_vec();
        let mut expired = Vec::new();
        for entry in ctx.range(self.stores.list, ..upto)? {
            let (key, ()) = entry?;
            ctx.delete(self.stores.list, &key)?;
            let (at, entry_key) = split_expiry_key(&key).map_err(ProcessError::msg)?;
            debug_assert!(at < self.watermark, "a scan takes expired entries only");
            expired.push((at, entry_key.to_vec()));
        }
        Ok(expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn expiry_keys_decode_to_what_was_encoded(
            at in any::<i64>(),
            key in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let bytes = expiry_key(at, &key);
            prop_assert_eq!(split_expiry_key(&bytes).unwrap(), (at, &key[..]));
        }

        #[test]
        fn expiry_keys_sort_by_expiry_first(
            a in any::<i64>(),
            b in any::<i64>(),
            ka in proptest::collection::vec(any::<u8>(), 0..8),
            kb in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            prop_assume!(a != b);
            prop_assert_eq!(a.cmp(&b), expiry_key(a, &ka).cmp(&expiry_key(b, &kb)));
        }
    }

    #[test]
    fn a_short_expiry_key_is_refused_not_misread() {
        assert!(split_expiry_key(&[1, 2, 3]).is_err());
    }
}
