#!/usr/bin/env bash
# Installs the Kafka clients that the compatibility suite (tests/compat)
# drives: confluent-kafka, kafka-python and aiokafka in a Python venv, Quix
# Streams in a venv of its own, kafkajs with npm. All live in the build
# cache, outside the clone, and are rebuilt only when the pinned versions (or
# the interpreter) change; when they are current this script does nothing.
#
# Locations (the Makefile exports the same defaults to the tests):
#   STRATA_COMPAT_VENV       the venv            [$STRATA_CACHE_DIR/compat/venv]
#   STRATA_COMPAT_QUIX_VENV  Quix Streams' venv  [$STRATA_CACHE_DIR/compat/quix-venv]
#   STRATA_COMPAT_NODE       the npm project dir [$STRATA_CACHE_DIR/compat/node]
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${STRATA_CACHE_DIR:-$HOME/.cache/strata}"
venv="${STRATA_COMPAT_VENV:-$cache/compat/venv}"
quix_venv="${STRATA_COMPAT_QUIX_VENV:-$cache/compat/quix-venv}"
node_dir="${STRATA_COMPAT_NODE:-$cache/compat/node}"
clients=tests/compat/clients

# The key of an install: the pinned files and the tool versions that run them.
key() { { cat "$@"; } | sha256sum | cut -d' ' -f1; }

python=""
for candidate in python3.11 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import venv, ensurepip' 2>/dev/null; then
    python=$candidate
    break
  fi
done
[ -n "$python" ] || {
  echo "no Python 3 with venv and ensurepip found: install python3.11 (or python3-venv)" >&2
  exit 1
}
command -v npm >/dev/null || {
  echo "npm is missing: install Node.js 20 or newer with npm" >&2
  exit 1
}

want=$(key "$clients/requirements.txt" <("$python" --version))
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$want" ]; then
  echo "installing the Python Kafka clients into $venv"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
    -r "$clients/requirements.txt"
  echo "$want" >"$venv/.installed"
fi

# Quix Streams pins an older confluent-kafka than the suite tests, so it
# gets a venv of its own.
want=$(key "$clients/quix-requirements.txt" <("$python" --version))
if [ "$(cat "$quix_venv/.installed" 2>/dev/null)" != "$want" ]; then
  echo "installing Quix Streams into $quix_venv"
  rm -rf "$quix_venv"
  mkdir -p "$(dirname "$quix_venv")"
  "$python" -m venv "$quix_venv"
  "$quix_venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
    -r "$clients/quix-requirements.txt"
  echo "$want" >"$quix_venv/.installed"
fi

want=$(key "$clients/package.json" "$clients/package-lock.json" <(node --version))
if [ "$(cat "$node_dir/.installed" 2>/dev/null)" != "$want" ]; then
  echo "installing kafkajs into $node_dir"
  rm -rf "$node_dir"
  mkdir -p "$node_dir"
  cp "$clients/package.json" "$clients/package-lock.json" "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$node_dir/.installed"
fi
