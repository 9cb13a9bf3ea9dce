//! Replay after a bug fix: a processor with a real bug runs live; the fixed
//! build is replayed from the start of the log into a version of its own
//! beside it; `diff` shows exactly the users the bug touched; `promote`
//! makes the fix live, and the old version stays for a rollback.
//!
//! The app counts each user's sessions from a clickstream (`clicks`, keyed
//! by user, the value `<session>\t<page>`). Version 1 counts a session
//! whenever an event's session differs from the user's previous event's, so
//! when a late event of an earlier session arrives after the next session
//! began (mobile clients send late), that session is counted twice.
//! Version 2 remembers every session it has seen.
//!
//! ```text
//! cargo run --example replay_after_fix                      # the whole story, in ./strata-replay-demo
//! cargo run --example replay_after_fix -- [--fixed] --data-dir DIR <command>   # the app's own commands
//! ```
//!
//! With a command, the binary is the app (`--fixed`: the fixed build) and
//! takes every subcommand apps get: `run`, `status`, `dump-state`,
//! `replay`, `diff`, `promote`, `versions`, `rebuild`, `checkpoint`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context as _;
use clap::{Args, Parser};
use strata::client::partitioner::partition_for_key;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{
    App, CheckpointArgs, Cli, Command, CommitArgs, Context, GroupArgs, LocationArgs, Outcome,
    Output, ProcessError, Processor, Record, Store,
};

/// `run --serve` answers the Kafka protocol: a request claiming an absurd
/// length must not abort the app (see `strata::broker::HugeReservingAllocator`).
#[global_allocator]
static ALLOCATOR: strata::broker::HugeReservingAllocator = strata::broker::HugeReservingAllocator;

const DEMO_DIR: &str = "./strata-replay-demo";
const PARTITIONS: i32 = 4;
const USERS: u64 = 5_000;
const SESSIONS_PER_USER: u64 = 4;
/// About one user in this many sends a late event.
const LATE_ONE_IN: u64 = 25;

#[derive(Debug, Clone, Args)]
struct Build {
    /// Run the fixed build (version 2) instead of version 1.
    #[arg(long)]
    fixed: bool,
}

const SEEN: Store<String, u8> = Store::new("seen");
const LAST_SESSION: Store<String, String> = Store::new("last-session");
const SESSIONS: Store<String, u64> = Store::new("sessions");
const USER_SESSIONS: Output<String, String> = Output::new("user-sessions");

/// Counts each user's sessions; the build is a field (version 1 or the fix).
struct SessionCount {
    fixed: bool,
}

impl Processor<String, String> for SessionCount {
    fn process(
        &mut self,
        click: Record<String, String>,
        ctx: &mut Context,
    ) -> Result<(), ProcessError> {
        let user = &click.key;
        let session = click
            .value
            .split('\t')
            .next()
            .unwrap_or_default()
            .to_string();
        let seen_key = format!("{user}/{session}");
        let seen = ctx.get(SEEN, &seen_key)?.is_some();
        let last = ctx.get(LAST_SESSION, user)?;
        let new_session = if self.fixed {
            !seen
        } else {
            // The bug: "new" only compared with the previous event.
            last.as_deref() != Some(session.as_str())
        };
        ctx.put(SEEN, &seen_key, &1)?;
        ctx.put(LAST_SESSION, user, &session)?;
        if new_session {
            let count = ctx.get(SESSIONS, user)?.unwrap_or(0) + 1;
            ctx.put(SESSIONS, user, &count)?;
            ctx.emit(USER_SESSIONS, user, &count.to_string())?;
        }
        Ok(())
    }
}

fn app(fixed: bool) -> App {
    App::new("sessions")
        .processor("count", move || SessionCount { fixed })
        .input("clicks")
        .store(SEEN)
        .store(LAST_SESSION)
        .store(SESSIONS)
        .output(USER_SESSIONS)
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    if std::env::args().len() > 1 {
        let cli = Cli::<Build>::parse();
        let app = app(cli.args.fixed);
        return Ok(strata::runtime::run_parsed(
            &app,
            &cli.location,
            &cli.command,
        ));
    }
    demo().map(|()| std::process::ExitCode::SUCCESS)
}

fn demo() -> anyhow::Result<()> {
    let dir = Path::new(DEMO_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the previous demo in {DEMO_DIR}"))?;
    }
    let late = write_clicks(dir)?;
    println!(
        "wrote {} users' clicks ({SESSIONS_PER_USER} sessions each) to `clicks` in {DEMO_DIR}; {} users sent a late event of an earlier session\n",
        USERS,
        late.len()
    );
    let location = LocationArgs {
        data_dir: Some(dir.to_path_buf()),
        ..LocationArgs::default()
    };
    let no_checkpoints = CheckpointArgs::default();
    let (v1, v2) = (app(false), app(true));

    println!("1. version 1 runs live:   run --until-end");
    strata::runtime::cli::execute(
        &v1,
        &location,
        &Command::Run {
            until_end: true,
            serve: None,
            metrics: None,
            query: None,
            console: None,
            http: Default::default(),
            commit: CommitArgs::default(),
            checkpoints: no_checkpoints.clone(),
            group: GroupArgs::default(),
        },
    )?;
    println!(
        "\n2. the fixed build is replayed beside it, from the start of the log:   --fixed replay --version v2 --from earliest --until-end"
    );
    strata::runtime::cli::execute(
        &v2,
        &location,
        &Command::Replay {
            version: "v2".into(),
            from: "earliest".into(),
            until_end: true,
            metrics: None,
            console: None,
            http: Default::default(),
            commit: CommitArgs::default(),
            checkpoints: no_checkpoints,
            group: GroupArgs::default(),
        },
    )?;
    println!("\n3. what the fix changes:   diff live v2");
    let outcome = strata::runtime::cli::execute(
        &v2,
        &location,
        &Command::Diff {
            a: "live".into(),
            b: "v2".into(),
            examples: 5,
        },
    )?;
    // The users the diff names in the sessions store (all of them: as many
    // examples as users sent late events, and one more).
    let app_location = location.location("sessions")?;
    let versions = strata::runtime::Versions::load(app_location.state_dir())?;
    let (live, fixed) = (versions.get("live")?, versions.get("v2")?);
    let report = tokio::runtime::Runtime::new()?.block_on(strata::runtime::ops::diff(
        &v2,
        &app_location,
        &live,
        &fixed,
        late.len() + 1,
    ))?;
    let sessions = report
        .stores
        .iter()
        .find(|store| store.store == "sessions")
        .context("the diff has no sessions store")?;
    let named: BTreeSet<String> = sessions
        .examples
        .iter()
        .filter_map(|line| line.strip_prefix("different: "))
        .filter_map(|rest| rest.split_once(':'))
        .map(|(user, _)| user.to_string())
        .collect();
    let others_same = report
        .stores
        .iter()
        .all(|store| store.store == "sessions" || !store.differs());
    println!(
        "   the diff names {} users in the sessions store: {} the users who sent late events",
        named.len(),
        if named == late { "exactly" } else { "NOT" }
    );
    anyhow::ensure!(
        outcome == Outcome::Differs
            && named == late
            && sessions.different == late.len() as u64
            && sessions.only_a + sessions.only_b == 0
            && others_same,
        "the diff does not match the generated late events"
    );
    println!("\n4. the fix goes live:   promote v2");
    strata::runtime::cli::execute(
        &v2,
        &location,
        &Command::Promote {
            version: "v2".into(),
        },
    )?;
    let me = "cargo run --example replay_after_fix --";
    println!(
        "\nNext:\n  {me} --fixed --data-dir {DEMO_DIR} versions          # v2 is live, base kept\n  {me} --fixed --data-dir {DEMO_DIR} run --until-end   # the live app goes on as v2 (into user-sessions.v2)\n  {me} --data-dir {DEMO_DIR} promote base              # roll back\n  cargo run -- log --data-dir {DEMO_DIR} consume user-sessions.v2 --partition 0"
    );
    Ok(())
}

/// Writes the clickstream: every user's sessions in order, a page view or
/// three each, and for some users one late event of their first session
/// after the second began. Returns those users.
fn write_clicks(dir: &Path) -> anyhow::Result<BTreeSet<String>> {
    let log = LogManager::open(dir, LogConfig::default())?;
    let topic = log.create_topic("clicks", PARTITIONS, BTreeMap::new())?;
    // Recent timestamps: retention (7 days) would delete older ones.
    let now = strata::log::now_ms();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut events: Vec<Vec<(String, String)>> = vec![Vec::new(); PARTITIONS as usize];
    let mut late = BTreeSet::new();
    for session in 0..SESSIONS_PER_USER {
        for user in 0..USERS {
            let name = format!("user-{user:05}");
            let partition = partition_for_key(name.as_bytes(), PARTITIONS) as usize;
            for _ in 0..1 + next() % 3 {
                let page = format!("/page/{}", next() % 500);
                events[partition].push((name.clone(), format!("s{session}\t{page}")));
            }
            if session == 1 && user % LATE_ONE_IN == next() % LATE_ONE_IN {
                events[partition].push((name.clone(), "s0\t/checkout".to_string()));
                late.insert(name);
            }
        }
    }
    for (partition, events) in topic.partitions.iter().zip(&events) {
        for chunk in events.chunks(1000) {
            let mut builder = BatchBuilder::new(Compression::Lz4);
            for (user, value) in chunk {
                builder.push(NewRecord::new(Some(user.as_bytes()), value.as_bytes(), now))?;
            }
            partition.append(&builder.build()?)?;
        }
    }
    log.close()?;
    Ok(late)
}
