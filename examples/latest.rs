//! The latest value per key: `latest` reads `changes` (UTF-8 keys and
//! values) and keeps, per key, its last value in the store `latest`; an
//! empty value deletes the key. Queried with `dump-state` or `query`, it is
//! a topic read as a table, the way a derived index is kept.
//!
//! ```text
//! printf 'a=1\nb=2\na=\n' | strata produce changes --key-separator = --bootstrap 127.0.0.1:9092
//! cargo run --example latest -- --bootstrap 127.0.0.1:9092 --state-dir ./latest-state run --until-end
//! cargo run --example latest -- --bootstrap 127.0.0.1:9092 --state-dir ./latest-state dump-state
//! ```

use strata::runtime::{App, Context, ProcessError, Record, Store};

const LATEST: Store<String, String> = Store::new("latest");

fn latest(change: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    match change.value.is_empty() {
        true => ctx.delete(LATEST, &change.key),
        false => ctx.put(LATEST, &change.key, &change.value),
    }
}

strata::main!(
    App::new("latest")
        .processor("latest", latest)
        .input("changes")
        .store(LATEST)
);
