#!/usr/bin/env bash
# Produce and consume through a PLAINTEXT and an SSL listener of the same
# broker, in one run, with kcat (librdkafka): 100-byte and 1 KiB records.
# Prints MB/s per case and the TLS/plaintext ratio. The certificates are
# made here with openssl; nothing is kept.
#
#   scripts/bench-tls.sh STRATA_BINARY [MIB_PER_RUN] [RUNS]
set -eu

strata=${1:?usage: bench-tls.sh STRATA_BINARY [MIB_PER_RUN] [RUNS]}
mib=${2:-256}
runs=${3:-3}
work=$(mktemp -d)
trap 'kill $broker 2>/dev/null || true; rm -rf "$work"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -keyout "$work/ca.key" -out "$work/ca.pem" -subj /CN=bench-ca 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$work/server.key" -out "$work/server.csr" -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$work/ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -CAcreateserial -days 1 -extfile "$work/ext" -out "$work/server.pem" 2>/dev/null

"$strata" serve --data-dir "$work/data" \
    --listener PLAINTEXT://127.0.0.1:0 --listener SSL://127.0.0.1:0 \
    --tls-cert "$work/server.pem" --tls-key "$work/server.key" > "$work/serve.out" 2>&1 &
broker=$!
for _ in $(seq 100); do
    [ "$(grep -c 'listening on' "$work/serve.out" 2>/dev/null)" = 2 ] && break
    sleep 0.1
done
plain=$(awk '/\(PLAINTEXT\)/ {print $4}' "$work/serve.out")
ssl=$(awk '/\(SSL\)/ {print $4}' "$work/serve.out")
ssl_args=(-X security.protocol=SSL -X "ssl.ca.location=$work/ca.pem")

seconds() { local start end; start=$(date +%s.%N); "$@"; end=$(date +%s.%N); awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'; }
rate() { awk -v bytes="$1" -v s="$2" 'BEGIN { print bytes / s / 1000000 }'; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

printf '%-28s %10s %10s\n' case plain_MB/s ssl_MB/s
for size in 100 1024; do
    lines=$(( mib * 1024 * 1024 / (size + 1) ))
    head -c $(( size / 2 )) /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c "$size" > "$work/line"
    yes "$(cat "$work/line")" | head -n "$lines" > "$work/records"
    bytes=$(stat -c %s "$work/records")
    best_p_plain=0; best_p_ssl=0; best_c_plain=0; best_c_ssl=0
    for run in $(seq "$runs"); do
        for listener in plain ssl; do
            addr=$plain; extra=()
            if [ $listener = ssl ]; then addr=$ssl; extra=("${ssl_args[@]}"); fi
            topic="t-$size-$listener-$run"
            p=$(seconds kcat -P -b "$addr" "${extra[@]}" -t "$topic" -X linger.ms=5 -X acks=1 -l "$work/records")
            c=$(seconds sh -c "kcat -C -b $addr ${extra[*]} -t $topic -o beginning -e -q > /dev/null")
            rp=$(rate "$bytes" "$p"); rc=$(rate "$bytes" "$c")
            if [ $listener = plain ]; then
                best_p_plain=$(max "$rp" "$best_p_plain"); best_c_plain=$(max "$rc" "$best_c_plain")
            else
                best_p_ssl=$(max "$rp" "$best_p_ssl"); best_c_ssl=$(max "$rc" "$best_c_ssl")
            fi
        done
    done
    printf '%-28s %10.1f %10.1f  ratio %s\n' "produce ${size} B (kcat)" "$best_p_plain" "$best_p_ssl" "$(ratio "$best_p_ssl" "$best_p_plain")"
    printf '%-28s %10.1f %10.1f  ratio %s\n' "consume ${size} B (kcat)" "$best_c_plain" "$best_c_ssl" "$(ratio "$best_c_ssl" "$best_c_plain")"
done
