#!/usr/bin/env bash
# Every benchmark in turn (`make bench-all`), in the release profile, and
# one Markdown table of every target they measure, each beside its
# reference from the same run, with MET or MISSED.
#
# Each benchmark's output goes to $OUT/<name>.txt; each target it measures
# is added to $OUT/targets.md (benches/summary/mod.rs writes the rows), and
# the table is written to $OUT/summary.md and printed. A benchmark that
# fails is named in the table and the others still run; the script then
# exits non-zero.
#
#   BENCHES="runtime operators" make bench-all   # a part of them
#   OUT=/tmp/bench make bench-all                # where the outputs go
set -uo pipefail

cd "$(dirname "$0")/.."
out=${OUT:-${CARGO_TARGET_DIR:-target}/bench-all}
benches=${BENCHES:-runtime operators rebuild restore schema latency requests overload sasl tls scale broker log}
mkdir -p "$out"
rows="$out/targets.md"
: >"$rows"
export STRATA_BENCH_SUMMARY
STRATA_BENCH_SUMMARY=$(realpath "$rows")

started=$(date +%s)
# The commit measured: the one the run starts at (and whether the tree
# had changes beside it).
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
    commit="$commit with uncommitted changes"
fi
failed=()
ran=()
for bench in $benches; do
    case $bench in
        log) make_target=bench ;;
        *) make_target=bench-$bench ;;
    esac
    echo "== make $make_target (output in $out/$bench.txt)"
    bench_started=$(date +%s)
    if make --no-print-directory "$make_target" >"$out/$bench.txt" 2>&1; then
        ran+=("$bench ($(($(date +%s) - bench_started)) s)")
    else
        failed+=("$bench")
        echo "   failed: the end of its output" >&2
        tail -n 20 "$out/$bench.txt" >&2
    fi
done

{
    echo "Benchmarks on $(nproc) cores, finished $(date -u +%Y-%m-%dT%H:%MZ), commit $commit, release profile."
    echo "Each target is measured against its reference in the same run. A floor, where"
    echo "given, is a plain program (no runtime) doing the work the case cannot avoid,"
    echo "durably where the case is, in the same run, with its ratio to the same reference."
    echo
    echo "| bench | target | measured | reference | ratio | goal | verdict | floor |"
    echo "|---|---|---:|---|---:|---:|---|---|"
    cat "$rows"
    for bench in ${failed[@]+"${failed[@]}"}; do
        echo "| $bench | the benchmark failed: see $out/$bench.txt | | | | | FAILED | |"
    done
    echo
    echo "Ran: ${ran[*]:-none}; $(($(date +%s) - started)) s in all."
} >"$out/summary.md"
echo
cat "$out/summary.md"
[ ${#failed[@]} -eq 0 ]
