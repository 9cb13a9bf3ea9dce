#!/usr/bin/env bash
# Installs what building and testing strata needs, if it is missing.
# With --bench, also what `make bench-broker` needs.
# As root it uses apt-get; otherwise it says what to install and fails.
set -euo pipefail

bench=false
case "${1:-}" in
  --bench) bench=true ;;
  "") ;;
  *) echo "usage: $0 [--bench]" >&2; exit 2 ;;
esac

missing=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

command -v cargo >/dev/null || {
  echo "cargo is missing: install Rust from https://rustup.rs (stable, 1.88 or newer)" >&2
  exit 1
}
# RocksDB's Rust bindings are generated with bindgen, which needs libclang;
# its C++ sources need a compiler.
command -v clang >/dev/null || missing+=(clang)
have_pkg libclang-dev || missing+=(libclang-dev)
command -v c++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
# The compatibility tests drive the broker with real Kafka clients: kcat from
# here, Python and Node.js ones from scripts/install-clients.sh.
command -v kcat >/dev/null || missing+=(kcat)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
# The web console's tests drive a real browser through WebDriver, and ask
# its pages with curl.
command -v curl >/dev/null || missing+=(curl)
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
if ! python3.11 -c 'import venv, ensurepip' 2>/dev/null &&
  ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing+=(python3-venv)
fi
if $bench; then
  # The broker benchmark measures loopback TCP with iperf3 and compiles its
  # load driver against librdkafka.
  command -v iperf3 >/dev/null || missing+=(iperf3)
  command -v cc >/dev/null || missing+=(gcc)
  have_pkg librdkafka-dev || missing+=(librdkafka-dev)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
