# strata: `make demo` and `make test` do all set-up on a fresh machine.

CARGO ?= cargo

# Where the compatibility suite's Kafka clients are installed (outside the
# clone, so CI reuses them); the tests read the same variables.
STRATA_CACHE_DIR ?= $(HOME)/.cache/strata
export STRATA_COMPAT_VENV ?= $(STRATA_CACHE_DIR)/compat/venv
export STRATA_COMPAT_QUIX_VENV ?= $(STRATA_CACHE_DIR)/compat/quix-venv
export STRATA_COMPAT_NODE ?= $(STRATA_CACHE_DIR)/compat/node

.PHONY: all deps deps-bench build demo test lint fmt soak bench bench-all bench-broker bench-runtime bench-schema bench-latency bench-rebuild bench-restore bench-operators bench-overload bench-requests bench-scale bench-tls bench-sasl fuzz prune clean

all: build

deps:
	@scripts/install-deps.sh
	@scripts/install-clients.sh

# What `make bench-broker` needs besides: iperf3 and librdkafka's headers.
deps-bench:
	@scripts/install-deps.sh --bench

build: deps
	$(CARGO) build

# The quickstart: a clickstream in an embedded log (./strata-data), a
# pipeline keeping a derived index of it, exactly once. Run it again to see
# it resume.
#
# Built optimized, so the records/s it prints is the runtime's real speed:
# the workspace's own crates (and the example) as in a release build,
# inside the dev profile. Only they are compiled again for it; their
# dependencies, RocksDB first of all (already at opt-level 3 in the dev
# profile), are the ones `make test` uses. A release build or a profile of
# its own would build RocksDB a second time, in a target directory of its
# own. `make soak` builds its million-line processor-crash run the same way.
WORKSPACE_CRATES = strata strata-record strata-log strata-protocol strata-http strata-client \
	strata-broker strata-registry strata-schema strata-runtime strata-operators
OPTIMIZED = $(foreach c,$(WORKSPACE_CRATES),profile.dev.package.$(c).opt-level=3 \
	profile.dev.package.$(c).debug-assertions=false \
	profile.dev.package.$(c).overflow-checks=false)
DEMO_BUILD = $(addprefix --config ,$(OPTIMIZED))

demo: deps
	$(CARGO) run $(DEMO_BUILD) --example quickstart

# The whole test suite: unit tests, integration tests (with the real-client
# compatibility suite, tests/compat), doc tests.
test: deps
	$(CARGO) test --workspace

# The hardening tests at soak counts (not part of `make test`, which runs
# them briefly); docs/reliability.md has what each checks and the latest
# figures. Counts are arguments: `make soak KILL_CYCLES=100 POWER_SEEDS=2000`.
KILL_CYCLES ?= 100
POWER_SEEDS ?= 2000
CRASH_KILLS ?= 200
CRASH_LINES ?= 1000000
TXN_KILLS ?= 100
FLOOD_CONNECTIONS ?= 6000
OVERLOAD_PRODUCES ?= 5000
DETERMINISM_CASES ?= 200
soak: deps
	STRATA_SOAK_FLOOD_CONNECTIONS=$(FLOOD_CONNECTIONS) $(CARGO) test --test broker connection_flood:: -- --nocapture
	STRATA_SOAK_OVERLOAD_PRODUCES=$(OVERLOAD_PRODUCES) $(CARGO) test --test broker overload_readers:: -- --nocapture
	STRATA_SOAK_KILL_CYCLES=$(KILL_CYCLES) $(CARGO) test --test broker kill9_queue:: -- --nocapture
	STRATA_SOAK_TXN_KILLS=$(TXN_KILLS) $(CARGO) test --test broker transactions_kill9:: -- --nocapture
	STRATA_SOAK_POWER_SEEDS=$(POWER_SEEDS) $(CARGO) test --test log power_loss:: -- --nocapture
	STRATA_SOAK_CRASH_KILLS=$(CRASH_KILLS) STRATA_SOAK_CRASH_LINES=$(CRASH_LINES) \
		STRATA_EXAMPLE_CONFIG='$(OPTIMIZED)' \
		$(CARGO) test $(DEMO_BUILD) --test runtime killed_at_random_moments -- --nocapture --test-threads 1
	STRATA_SOAK_DETERMINISM_CASES=$(DETERMINISM_CASES) $(CARGO) test --test runtime determinism:: -- --nocapture

# Formatting and lints, as CI checks them.
lint: deps
	$(CARGO) fmt --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

# Every benchmark below in turn, release profile as users run it, and one
# Markdown table of every target beside its reference from the same run,
# with MET or MISSED (scripts/bench-all.sh; about 25 minutes here; BENCHES=
# picks some, OUT= says where the outputs and summary.md go).
bench-all: deps-bench
	@scripts/bench-all.sh

# Criterion benchmarks (release profile; not part of `make test`).
bench: deps
	$(CARGO) bench --bench log

# strata serve (optimized) under librdkafka clients, beside loopback TCP and
# disk baselines; prints a table and each target's ratio. Takes minutes.
bench-broker: deps-bench
	$(CARGO) bench --bench broker

# End-to-end latency (send to derived record readable) through a counting
# app, embedded and remote, acks=1 and acks=all, at half the measured
# maximum rate, beside the input topic read back (release profile; a few
# minutes).
bench-latency: deps
	$(CARGO) bench --bench latency

# Embedded exactly-once stateful processing beside a plain fetch-and-decode
# loop over the same records, in one run (optimized; not part of `make test`).
bench-runtime: deps
	$(CARGO) bench --bench runtime

# Avro records through the runtime beside a plain loop decoding them with
# the same crate, in one run (optimized; a minute).
bench-schema: deps
	$(CARGO) bench --bench schema

# strata-operators' pipelines (count, windowed count, join, word count)
# beside the plain loop, the HashMap count and the same apps written by
# hand, in one run (optimized; takes minutes).
bench-operators: deps
	$(CARGO) bench --bench operators

# Rebuilding a derived index from a 10M-record topic beside a plain
# fetch-and-decode loop over it, in one run (optimized; takes minutes).
bench-rebuild: deps
	$(CARGO) bench --bench rebuild

# A store's restore from its changelog (remote, against strata serve)
# beside `strata bench consume --read-committed` over the same changelog,
# in one run (release profile; a few minutes).
bench-restore: deps
	$(CARGO) bench --bench restore

# A producer's acks=all p50/p99 alone and beside 100 consumers that never
# read, in one run, with the ratio (release profile; takes a minute).
bench-overload: deps
	$(CARGO) bench --bench overload

# The broker's CPU per request under one-record produces and one-batch
# fetches, beside an echo server over the same framing, in one run
# (release profile; a minute).
bench-requests: deps
	$(CARGO) bench --bench requests

# Produce and consume with kcat through a PLAINTEXT and an SSL listener of
# one broker (release profile), in one run: MB/s for each and the TLS ratio.
bench-tls: deps
	$(CARGO) build --release --bin strata
	scripts/bench-tls.sh $${CARGO_TARGET_DIR:-target}/release/strata

# SASL connection set-up through one optimized broker, in one run:
# connections/s for PLAIN, SCRAM-SHA-256/512 (SASL_PLAINTEXT) and
# SCRAM-SHA-512 over SASL_SSL beside plain TCP and TLS connects, with the
# broker's CPU per connection and PBKDF2's rate as the CPU floor; then a
# producer's MB/s alone and beside a SCRAM login storm, with the ratio
# (release profile; a minute).
bench-sasl: deps
	$(CARGO) bench --bench sasl

# The wordcount example in remote mode, one instance and then two side by
# side against one `strata serve`, with the CPU each case used and the
# broker's busiest APIs (LINES=2000000 ROUNDS=2 by default).
bench-scale: deps
	@scripts/bench-scale.sh

# Every fuzz target (fuzz/fuzz_targets) for FUZZ_SECONDS each, from the
# checked-in seeds (fuzz/corpus/<target>). Needs the nightly toolchain and
# cargo-fuzz (installed if missing); builds in a target directory of its
# own, as it compiles with different flags. What the fuzzers find goes to
# FUZZ_CORPUS_DIR, outside the clone; a crash stops the run and its input
# is in fuzz/artifacts/<target>. Not part of `make test`, which replays the
# checked-in corpus (tests/hostile/fuzz_corpus.rs).
FUZZ_SECONDS ?= 30
FUZZ_TARGET_DIR ?= $(STRATA_CACHE_DIR)/fuzz-target
FUZZ_CORPUS_DIR ?= $(STRATA_CACHE_DIR)/fuzz-corpus

fuzz: deps
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && for target in $$($(CARGO) +nightly fuzz list); do \
		mkdir -p $(FUZZ_CORPUS_DIR)/$$target && \
		$(CARGO) +nightly fuzz run --sanitizer none --target-dir $(FUZZ_TARGET_DIR) \
			$$target $(FUZZ_CORPUS_DIR)/$$target corpus/$$target \
			-- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# Removes what earlier builds of the workspace left in the build directory
# (old copies of the test binaries, stale incremental state), keeping the
# dependencies: a persistent CARGO_TARGET_DIR otherwise grows by some
# 7 GB with every change to a crate of the workspace. CI runs it first.
prune:
	@scripts/prune-target.sh $${CARGO_TARGET_DIR:-target}

clean:
	$(CARGO) clean
