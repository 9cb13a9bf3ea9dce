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

#[cfg(test)]
mod tests {
    use super::*;
    use strata::runtime::EmitOptions;
    use strata::testing::TestDriver;

    const MINUTE: i64 = 60_000;

    fn profile(name: &str, country: &str) -> Profile {
        let (name, country) = (name.to_string(), country.to_string());
        Profile { name, country }
    }

    fn at(ms: i64) -> EmitOptions {
        EmitOptions::default().timestamp(ms)
    }

    /// Profiles and views of 40 users over three partitions, each user's
    /// profile changing halfway; what each view must be enriched with.
    fn traffic(driver: &mut TestDriver) -> Vec<(String, String, Option<String>)> {
        let t0 = driver.now_ms();
        let mut expected = Vec::new();
        // Each input in timestamp order: records are taken across inputs
        // by the timestamps at their heads.
        for (minute, version, country) in [(1, "first", "NO"), (10, "second", "SE")] {
            for user in (0..40).map(|u| format!("u{u}")) {
                let profile = profile(&format!("{user} {version}"), country);
                driver
                    .pipe_with(PROFILES, &user, &profile, at(t0 + minute * MINUTE))
                    .unwrap();
            }
        }
        for minute in [0, 5, 15] {
            for user in (0..40).map(|u| format!("u{u}")) {
                let page = format!("/{minute}");
                driver
                    .pipe_with(PAGE_VIEWS, &user, &page, at(t0 + minute * MINUTE))
                    .unwrap();
                let name = match minute {
                    0 => None,
                    5 => Some(format!("{user} first")),
                    _ => Some(format!("{user} second")),
                };
                expected.push((user, page, name));
            }
        }
        expected
    }

    fn enriched(driver: &mut TestDriver) -> Vec<(String, String, Option<String>)> {
        let mut views: Vec<_> = (driver.output(ENRICHED).unwrap().into_iter())
            .map(|r| {
                let view = r.value.unwrap();
                (r.key.unwrap(), view.page, view.name)
            })
            .collect();
        views.sort();
        views
    }

    #[test]
    fn each_view_meets_the_profile_current_at_its_time() {
        let mut driver = TestDriver::new(app()).unwrap();
        driver.partitions(PAGE_VIEWS, 3).unwrap();
        driver.partitions(PROFILES, 3).unwrap();
        let mut expected = traffic(&mut driver);
        expected.sort();
        assert_eq!(enriched(&mut driver), expected);
        let latest = driver.output_table(ENRICHED).unwrap();
        assert_eq!(latest["u7"].country.as_deref(), Some("SE"));
        driver.assert_replay_matches();
    }

    #[test]
    fn a_crash_and_a_restart_enrich_every_view_once() {
        let mut driver = TestDriver::new(app()).unwrap();
        driver.partitions(PAGE_VIEWS, 3).unwrap();
        driver.partitions(PROFILES, 3).unwrap();
        driver.commit_every(20);
        let mut expected = traffic(&mut driver);
        expected.sort();
        assert!(driver.crash_after(100).unwrap(), "the crash cuts the run");
        driver.restart().unwrap();
        assert_eq!(enriched(&mut driver), expected);
        driver.assert_replay_matches();
    }
}
