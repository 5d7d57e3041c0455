#!/usr/bin/env bash
# soak.sh - long soak of vaultgate (not a test, not in CI; tests/integration/cases/
# test_soak_short.py is its short cut that runs in the suite, also under ASan/LSan).
#
# Sends a bounded number of requests through one vaultgate - keep-alive connections (wrk) and a
# new TLS connection per request (wrk with `Connection: close`) at the same time, bearer
# injection and reflection masking on every request, audit store on (SQLite) - to an nginx
# upstream over verified TLS. Every SAMPLE seconds it records vaultgate's RSS, its request count
# (vaultgate_requests_total from /metrics) and its open connections into a table. At the end it
# prints the table, RSS growth after the warm-up (the first WARM_PCT % of the requests), the
# error count (wrk's non-2xx responses and socket errors, vaultgate's error lines) and the exit
# status of a SIGTERM stop. Loopback only.
#
# Usage: tests/bench/soak.sh [BUILD_DIR]
#   env: REQUESTS=2000000 KA_CONNS=32 NEW_CONNS=4 ROUND=20 SAMPLE=5 WARM_PCT=10 THREADS=1
#        PROXY_CPU=0 LOAD_CPU=1 VG_LOG_LEVEL=warn KEEP=1 (keep the work directory)
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
VG=$BUILD/cli/vaultgate
REQUESTS=${REQUESTS:-2000000}
KA_CONNS=${KA_CONNS:-32}
NEW_CONNS=${NEW_CONNS:-4}
ROUND=${ROUND:-20}
SAMPLE=${SAMPLE:-5}
WARM_PCT=${WARM_PCT:-10}
THREADS=${THREADS:-1}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
VG_LOG_LEVEL=${VG_LOG_LEVEL:-warn}
UP_ADDR=127.0.0.94
SECRET=sk-soak-0123456789abcdef

[ -x "$VG" ] || { echo "no vaultgate at $VG" >&2; exit 1; }
for t in nginx wrk openssl taskset curl python3; do
    command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

. "$SRC/tests/bench/lib.sh"
bench_workdir vgsoak
now() { date +%s.%N; }

# ---- certificates and upstream: test CA, the upstream's leaf, nginx answering over TLS ----
bench_ca soak-ca
bench_leaf up "IP:127.0.0.1"
bench_upstream "$UP_ADDR" "soak ok"

# ---- vaultgate ----
PORT=$(free_port)
ADMIN=$(free_port)
VG_THREADS=$THREADS VG_ADMIN=$ADMIN VG_AUDIT=sqlite start_vaultgate # lib.sh
VG_PID=$MAIN_PID
PIDS+=($VG_PID)
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$ADMIN/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
if ! curl -sf "http://127.0.0.1:$ADMIN/readyz" >/dev/null; then
    echo "vaultgate not ready" >&2
    cat "$(vg_log)" >&2
    exit 1
fi

metric() { # sum of the samples of one metric name
    curl -s "http://127.0.0.1:$ADMIN/metrics" |
        awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%d", s }'
}
served() { metric vaultgate_requests_total; }
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$VG_PID/status"; }

# ---- sampler: seconds, requests served, RSS, open connections ----
T0=$(now)
(
    while kill -0 "$VG_PID" 2>/dev/null; do
        printf '%8.1f %10s %9s %6s\n' "$(awk -v a="$T0" -v b="$(now)" 'BEGIN { print b - a }')" \
            "$(served)" "$(rss)" "$(metric vaultgate_connections_active)"
        sleep "$SAMPLE"
    done
) >"$W/samples" &
SAMPLER=$!
PIDS+=($SAMPLER)

# ---- load, in rounds until REQUESTS were served ----
URL="https://127.0.0.1:$PORT/soak"
errors=0
rounds=0
ka_total=0
new_total=0
wrk_errors() { # non-2xx responses + socket errors in one wrk output
    awk '/Non-2xx/ { n += $NF }
         /Socket errors/ { gsub(",", ""); n += $4 + $6 + $8 + $10 }
         END { print n + 0 }' "$1"
}
while [ "$(served)" -lt "$REQUESTS" ]; do
    taskset -c "$LOAD_CPU" wrk -t1 -c"$KA_CONNS" -d"${ROUND}s" \
        -H "Authorization: Bearer placeholder" "$URL" >"$W/ka.out" 2>&1 &
    ka=$!
    taskset -c "$LOAD_CPU" wrk -t1 -c"$NEW_CONNS" -d"${ROUND}s" -H "Connection: close" \
        -H "Authorization: Bearer placeholder" "$URL" >"$W/new.out" 2>&1 &
    nc=$!
    PIDS+=($ka $nc)
    wait "$ka" "$nc" || true
    rounds=$((rounds + 1))
    e1=$(wrk_errors "$W/ka.out")
    e2=$(wrk_errors "$W/new.out")
    r1=$(awk '/requests in/ { print $1 }' "$W/ka.out")
    r2=$(awk '/requests in/ { print $1 }' "$W/new.out")
    ka_total=$((ka_total + ${r1:-0}))
    new_total=$((new_total + ${r2:-0}))
    errors=$((errors + e1 + e2))
    if [ $((e1 + e2)) -gt 0 ]; then
        echo "round $rounds: errors"
        grep -hE 'Non-2xx|Socket errors' "$W/ka.out" "$W/new.out"
    fi
    echo "round $rounds: served $(served), RSS $(rss) KiB"
done
sleep "$SAMPLE"
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true

printf '%8s %10s %9s %6s\n' "seconds" "requests" "RSS KiB" "conns"
cat "$W/samples"
total=$(served)
vg_errors=$(grep -c '"level":"error"' "$(vg_log)" || true)
awk -v total="$total" -v warm="$WARM_PCT" '
    $2 >= total * warm / 100 && base == "" { base = $3; at = $2 }
    base != "" && $3 > peak { peak = $3 }
    { last = $3 }
    END {
        f = "requests %d; RSS after the warm-up (at %d requests) %d KiB, peak %d KiB, "
        f = f "final %d KiB: growth %d KiB (%.2f%%)\n"
        printf f, total, at, base, peak, last, peak - base, (base > 0 ? 100 * (peak - base) / base : 0)
    }' "$W/samples"
echo "wrk requests: keep-alive $ka_total, new connections $new_total; errors: wrk $errors," \
    "vaultgate error lines $vg_errors"
kill -TERM "$VG_PID"
rc=0
wait "$VG_PID" || rc=$?
echo "vaultgate stopped: exit $rc"
[ "$errors" -eq 0 ] && [ "$vg_errors" -eq 0 ] && [ "$rc" -eq 0 ]
