//! How a store's keys are laid out, as the builder declares it after the
//! store: a window store's ([`super::window_key`], and the grid its
//! windows start on) or an index store's ([`super::index_key`]), read by
//! queries and by the task's prefetch. Apart from `topology`, which
//! declares the processors, stores and topics themselves.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use strata_record::codec::Codec;

use super::spec::WindowKeys;
use super::topology::App;

impl App {
    /// Declares the last store a window store: its keys are laid out as
    /// [`window_key`](super::window_key) says, over keys of type `K`
    /// encoded with `codec`, so that queries can ask for one key's windows
    /// in a time range (`query STORE --window KEY --from T1 --to T2`).
    pub fn window_keys<K>(mut self, codec: Codec) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
    {
        let store = self.last("window_keys").and_then(|p| p.stores.last_mut());
        match store {
            Some(store) => {
                store.text = store.text.clone().windowed::<K>(codec);
                store.window_keys = Some(WindowKeys {
                    key_codec: codec,
                    advance_ms: None,
                });
            }
            None => self.fail("window_keys declared before a store of the processor".into()),
        }
        self
    }

    /// Declares that the windows of the last store (a window store, see
    /// [`App::window_keys`]) start at every multiple of `advance` since
    /// the epoch, as tumbling and hopping windows do. The task then asks
    /// the CPU for the entry of the latest window a record falls in a few
    /// records before the processor reads it, as it does for stores keyed
    /// like the input: the processor finds it in the cache.
    pub fn windows_start_every(mut self, advance: Duration) -> Self {
        let advance_ms = i64::try_from(advance.as_millis()).unwrap_or(i64::MAX);
        let store = self
            .last("windows_start_every")
            .and_then(|p| p.stores.last_mut());
        let failed = match store {
            Some(store) => match &mut store.window_keys {
                Some(keys) if advance_ms > 0 => {
                    keys.advance_ms = Some(advance_ms);
                    None
                }
                Some(_) => Some("windows_start_every needs an advance of 1 ms or more"),
                None => Some("windows_start_every declared before window_keys"),
            },
            None => Some("windows_start_every declared before a store of the processor"),
        };
        if let Some(failed) = failed {
            self.fail(failed.into());
        }
        self
    }

    /// Declares the last store an index store: its keys are laid out as
    /// [`index_key`](super::index_key) says (a field, then a row key of
    /// type `K` encoded with `codec`), so that queries can ask for the
    /// row keys of one field value (`query STORE --field F`) or a field
    /// prefix (`--prefix P`).
    pub fn index_keys<K>(mut self, codec: Codec) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
    {
        let store = self.last("index_keys").and_then(|p| p.stores.last_mut());
        match store {
            Some(store) => store.text = store.text.clone().indexed::<K>(codec),
            None => self.fail("index_keys declared before a store of the processor".into()),
        }
        self
    }
}
