#!/usr/bin/env bash
# Keeps a persistent build directory from filling the disk.
#
# Every change to a crate of the workspace leaves a new copy of each test
# binary and example (up to a few hundred MB each, some 7 GB for a full
# `make test`) beside the old ones, and cargo never removes them; nor the
# incremental-compilation state of builds long gone. For the workspace's
# own targets only, this removes the copies left by earlier builds, and
# incremental state untouched for a day. Dependencies (RocksDB above all,
# a twelve-minute build) are left alone.
#
# Usage: scripts/prune-target.sh [TARGET_DIR]   (default: $CARGO_TARGET_DIR or ./target)
set -euo pipefail

target="${1:-${CARGO_TARGET_DIR:-target}}"
[ -d "$target" ] || exit 0
before=$(du -sm "$target" | cut -f1)

# In one directory: of the files named <stem>-<16 hex digits>[.rlib|.rmeta]
# that the workspace builds (executables: tests, binaries, examples; and
# the strata libraries), those an hour older than the newest of their name.
# Copies built together are kept: one build makes several of one name (the
# library's tests and the binary's are both strata-<hash>; clippy's
# metadata beside the build's), and removing one would rebuild it.
prune_copies() {
    find "$1" -maxdepth 1 -type f -regextype posix-extended \
        \( \( -regex '.*/[^/.]+-[0-9a-f]{16}' -perm -u+x \) \
        -o -regex '.*/libstrata(_[a-z]+)?-[0-9a-f]{16}\.(rlib|rmeta)' \) \
        -printf '%T@ %p\n' |
        sort -rn |
        sed -E 's|^([^ ]+) ((.*/)?([^/]+)-[0-9a-f]{16}(\.[a-z]+)?)$|\1 \4\5 \2|' |
        awk '!($2 in newest) { newest[$2] = $1 } $1 < newest[$2] - 3600 { print $3 }' |
        xargs -r rm -f
}

for profile in "$target"/*/; do
    for dir in deps examples; do
        [ -d "$profile$dir" ] && prune_copies "$profile$dir"
    done
    if [ -d "${profile}incremental" ]; then
        find "${profile}incremental" -mindepth 1 -maxdepth 1 -mtime +0 -exec rm -rf {} +
    fi
done

after=$(du -sm "$target" | cut -f1)
echo "pruned $target: ${before} MiB -> ${after} MiB"
