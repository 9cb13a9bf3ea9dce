//! A stream–table join with the pipeline of `strata-operators`: page views
//! (`page-views`, user → page) enriched with user profiles (`profiles`,
//! user → JSON profile, the latest per user; a null value deletes one)
//! into `enriched-views` (user → JSON view with the profile's name and
//! country, or none when the user has no profile yet); the latest view
//! of each user is also kept in the store `latest-views`, which the app
//! answers queries of (`query latest-views u1`, or `run --query ADDR` and
//! `GET /stores/latest-views/keys/u1`).
//!
//! `page-views` and `profiles` must have the same partition count, both
//! keyed by user: partition i of each meets in one task.
//!
//! ```text
//! printf 'u1:{"name":"Ada","country":"UK"}\n' | kcat -P -b 127.0.0.1:9092 -t profiles -K:
//! printf 'u1:/home\nu2:/pricing\n' | kcat -P -b 127.0.0.1:9092 -t page-views -K:
//! cargo run --example enrich -- --bootstrap 127.0.0.1:9092 --state-dir ./enrich-state run
//! cargo run --example enrich -- --data-dir ./strata-data run --until-end
//! cargo run --example enrich -- --data-dir ./strata-data query latest-views u1
//! ```

use serde::{Deserialize, Serialize};
use strata::codec::Codec;
use strata::runtime::App;
use strata_operators::{Pipeline, PipelineError, Topic};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Profile {
    name: String,
    country: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct EnrichedView {
    page: String,
    name: Option<String>,
    country: Option<String>,
}

const PAGE_VIEWS: Topic<String, String> = Topic::new("page-views");
const PROFILES: Topic<String, Profile> = Topic::new("profiles").codecs(Codec::Raw, Codec::Json);
const ENRICHED: Topic<String, EnrichedView> =
    Topic::new("enriched-views").codecs(Codec::Raw, Codec::Json);

fn app() -> Result<App, PipelineError> {
    let pipeline = Pipeline::new("enrich");
    let profiles = pipeline.table(PROFILES);
    let enriched = pipeline.from(PAGE_VIEWS).named("enrich").left_join(
        &profiles,
        |_user, page, profile: Option<Profile>| EnrichedView {
            page,
            name: profile.as_ref().map(|p| p.name.clone()),
            country: profile.map(|p| p.country),
        },
    );
    enriched.to(ENRICHED);
    // Each user's latest view, for queries.
    enriched
        .stored_as("latest-views")
        .reduce(|_, latest| latest.clone());
    pipeline.app()
}

strata::main!(app());
