#!/usr/bin/env bash
# `make bench-scale`: the wordcount example in remote mode against one
# `strata serve`, run by one instance and then by two instances side by
# side, over the same input (LINES lines of 8 words in a topic of 4
# partitions), in ROUNDS pairs taken in turn. Every case starts from a
# fresh broker data directory and empty state directories; the input is
# produced before the clock starts.
#
# For each case it prints the wall time (from the start of the instances
# until the group's committed offsets reach the end of every input, lines
# and words, as the broker's `strata_group_lag` shows them), lines/s,
# and what the case used of the machine: the CPU seconds of the
# instances and of the broker, their sum over the wall time (cores busy)
# and the broker's time per API (`strata_request_seconds_total`, the
# busiest first). That last part is the floor: a second instance can add
# throughput only if the machine has cores left over while one runs, and
# only as far as what the instances share (the broker) keeps up.
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=${LINES:-2000000}
ROUNDS=${ROUNDS:-2}
# More `run` flags for every instance, e.g. RUN_ARGS="--commit-ms 1000".
read -r -a run_args <<< "${RUN_ARGS:-}"
# The release profile, as users run it.
cargo build --quiet --release --bin strata --example wordcount
target=${CARGO_TARGET_DIR:-target}/release
strata=$target/strata
wordcount=$target/examples/wordcount

(( ROUNDS >= 1 )) || { echo "ROUNDS must be at least 1" >&2; exit 2; }
# The longest a case may take before the script gives up on it.
CASE_SECS=${CASE_SECS:-600}

work=$(mktemp -d)
broker_pid=
pids=()
cleanup() {
    kill "${pids[@]}" $broker_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The input, once: LINES lines of 8 words out of 20,000.
awk -v n="$LINES" 'BEGIN { srand(7); for (i = 0; i < n; i++) {
    line = ""; for (w = 0; w < 8; w++) line = line " w" int(rand() * 20000);
    print substr(line, 2) } }' > "$work/lines.txt"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# CPU seconds (user + system) of a live process.
cpu_of() {
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"
}

start_broker() {
    local port=$1 metrics=$2
    rm -rf "$work/data"
    cat > "$work/strata.toml" <<EOF
group_initial_rebalance_delay_ms = 0
group_min_session_timeout_ms = 1000
EOF
    "$strata" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
        --metrics "127.0.0.1:$metrics" --config "$work/strata.toml" > "$work/broker.log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 100); do
        "$strata" --bootstrap "127.0.0.1:$port" topics list > /dev/null 2>&1 && return
        sleep 0.1
    done
    echo "the broker did not start:" >&2
    cat "$work/broker.log" >&2
    exit 1
}

# One case: $1 instances of wordcount over the input; prints one line.
run_case() {
    local instances=$1 port metrics
    port=$(free_port)
    metrics=$(free_port)
    start_broker "$port" "$metrics"
    local bootstrap=127.0.0.1:$port
    "$strata" --bootstrap "$bootstrap" topics create lines --partitions 4 > /dev/null
    "$strata" --bootstrap "$bootstrap" produce lines --acks 1 < "$work/lines.txt" > /dev/null 2>&1
    # Keyless lines spread over the partitions a batch at a time; a
    # partition left empty would leave a task with nothing to do.
    local spread
    spread=$("$strata" --bootstrap "$bootstrap" topics describe lines |
        awk '$1 ~ /^[0-9]+$/ { printf "%s%s", (n++ ? " " : ""), $5 }')
    if [[ " $spread " == *" 0 "* ]]; then
        echo "the input was not spread over the 4 partitions (lines per partition: $spread)" >&2
        exit 1
    fi
    local broker_before started i
    pids=()
    broker_before=$(cpu_of "$broker_pid")
    started=$(date +%s.%N)
    for i in $(seq "$instances"); do
        rm -rf "$work/state-$i"
        "$wordcount" --bootstrap "$bootstrap" --state-dir "$work/state-$i" \
            run --session-timeout-ms 3000 "${run_args[@]}" > "$work/app-$i.log" 2>&1 &
        pids+=($!)
    done
    # Done once both processors' committed offsets are at their inputs'
    # ends: `split` on the 4 partitions of lines, `count` on those of words.
    local deadline=$((SECONDS + CASE_SECS))
    until curl -s --max-time 2 "http://127.0.0.1:$metrics/metrics" | awk '
        /^strata_group_lag\{/ && /topic="(lines|words)"/ { rows++; if ($NF != 0) behind++ }
        END { exit !(rows == 8 && behind == 0) }'; do
        for i in $(seq "$instances"); do
            if ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
                echo "instance $i stopped before the end:" >&2
                tail -5 "$work/app-$i.log" >&2
                exit 1
            fi
        done
        if ! kill -0 "$broker_pid" 2>/dev/null; then
            echo "the broker stopped:" >&2
            tail -5 "$work/broker.log" >&2
            exit 1
        fi
        if (( SECONDS > deadline )); then
            echo "not at the inputs' ends after $CASE_SECS s (CASE_SECS); the lag:" >&2
            curl -s --max-time 2 "http://127.0.0.1:$metrics/metrics" | grep '^strata_group_lag' >&2
            exit 1
        fi
        sleep 0.2
    done
    local ended broker_after app_cpu=0
    ended=$(date +%s.%N)
    broker_after=$(cpu_of "$broker_pid")
    for i in "${pids[@]}"; do
        app_cpu=$(awk -v sum="$app_cpu" -v more="$(cpu_of "$i")" 'BEGIN { printf "%.2f", sum + more }')
    done
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" || true
    pids=()
    local apis
    apis=$(curl -s "http://127.0.0.1:$metrics/metrics" | awk '
        /^strata_request_seconds_total/ { match($0, /api="[A-Za-z0-9]+"/);
            api = substr($0, RSTART + 5, RLENGTH - 6); s[api] += $NF }
        END { for (a in s) printf "%s %.1f\n", a, s[a] }' | sort -k2 -nr | head -4 |
        awk '{ printf "%s%s %ss", (NR > 1 ? ", " : ""), $1, $2 }')
    kill "$broker_pid"
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=
    awk -v n="$instances" -v lines="$LINES" -v s="$started" -v e="$ended" -v app="$app_cpu" \
        -v b0="$broker_before" -v b1="$broker_after" -v apis="$apis" 'BEGIN {
        wall = e - s; broker = b1 - b0;
        printf "%d instance%s  %6.2f s  %9.0f lines/s  app %5.1f CPU-s  broker %5.1f CPU-s  %.2f cores busy  broker time: %s\n",
            n, (n > 1 ? "s" : " "), wall, lines / wall, app, broker, (app + broker) / wall, apis }'
    echo "$instances $(awk -v s="$started" -v e="$ended" 'BEGIN { print e - s }')" >> "$work/walls"
}

echo "input: $LINES lines of 8 words, 4 partitions; $(nproc) cores; run ${RUN_ARGS:-(defaults)}"
for round in $(seq "$ROUNDS"); do
    run_case 1
    run_case 2
done
awk '{ w[$1] = (w[$1] == "" || $2 < w[$1]) ? $2 : w[$1] }
    END { printf "best: one instance %.2f s, two %.2f s: two instances %.2fx one\n",
        w[1], w[2], w[1] / w[2] }' "$work/walls"
