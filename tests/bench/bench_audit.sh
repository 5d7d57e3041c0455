#!/usr/bin/env bash
# bench_audit.sh - issue 6: requests per second under blocked-host load, with the SQLite audit
# store against --audit off (a benchmark, not a test). docs/benchmarks.md says how to read it.
#
# vaultgate: one worker, the whole process (worker, audit thread) pinned to CPU $PROXY_CPU;
# wrk on CPU $LOAD_CPU sends plain-HTTP requests (the Host-routed listener, so that a host
# costs no TLS handshake or certificate) for hosts under a blocked wildcard: every request is
# answered 403 with Connection: close (so each is a new TCP connection) and counted into
# blocked_host_log. Two host mixes:
#   distinct   every request names a new host (d<N>.blocked.test): each is a first block,
#              written to the store at once (SPEC §6)
#   repeated   16 hosts over and over: counts aggregated in memory, flushed every second
# Loopback only. Prints req/s and req per proxy CPU-second for sqlite and off, and the ratios.
#
# Usage: tests/bench/bench_audit.sh [BUILD_DIR]
#   env: SECS=10 CONNS=32 PROXY_CPU=0 LOAD_CPU=1 VG=path/to/vaultgate
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
VG=${VG:-$BUILD/cli/vaultgate}
SECS=${SECS:-10}
CONNS=${CONNS:-32}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}

[ -x "$VG" ] || { echo "no vaultgate at $VG" >&2; exit 1; }
for t in wrk taskset python3 sqlite3; do
    command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }
done

W=$(mktemp -d /tmp/vgaudit.XXXXXX)
VG_PID=
cleanup() {
    [ -n "$VG_PID" ] && kill "$VG_PID" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT

. "$SRC/tests/bench/lib.sh"
cat >"$W/vault.json" <<EOF
{"version": 1, "run": {"id": "bench-audit", "user": "bench"},
 "secrets": {}, "rules": [],
 "host_policy": {"default": "allow", "hosts": {"*.blocked.test": "block"}}}
EOF
# wrk scripts: a new host per request, or 16 hosts in turn (per wrk thread: one thread here)
cat >"$W/distinct.lua" <<'EOF'
local n = 0
request = function()
    n = n + 1
    return wrk.format("GET", "/", { Host = "d" .. n .. ".blocked.test" })
end
EOF
cat >"$W/repeated.lua" <<'EOF'
local n = 0
request = function()
    n = (n + 1) % 16
    return wrk.format("GET", "/", { Host = "r" .. n .. ".blocked.test" })
end
EOF

TICK=$(getconf CLK_TCK)
declare -A RPS RPS_CPU ROWS

run() { # audit mix
    local port admin out c0 c1 cpu audit_url=off
    port=$(free_port)
    admin=$(free_port)
    rm -rf "$W/var"
    [ "$1" = sqlite ] && audit_url="sqlite:$W/var/audit.db"
    taskset -c "$PROXY_CPU" "$VG" run --vault "$W/vault.json" --state-dir "$W/var" --threads 1 \
        --listen-https "127.0.0.1:$(free_port)" --listen-http "127.0.0.1:$port" --admin "127.0.0.1:$admin" \
        --audit "$audit_url" --log-level warn 2>"$W/vg.stderr" &
    VG_PID=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null -H 'Host: probe.blocked.test' "http://127.0.0.1:$port/" && break
        sleep 0.1
    done
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d2s -s "$W/$2.lua" "http://127.0.0.1:$port/" >/dev/null
    c0=$(cpu_of "$VG_PID")
    out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${SECS}s" -s "$W/$2.lua" "http://127.0.0.1:$port/")
    c1=$(cpu_of "$VG_PID")
    RPS[$1.$2]=$(echo "$out" | awk '/Requests\/sec/ { printf "%.0f", $2 }')
    cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
    RPS_CPU[$1.$2]=$(awk -v r="${RPS[$1.$2]}" -v s="$SECS" -v c="$cpu" \
        'BEGIN { printf "%.0f", (c > 0 ? r * s / c : 0) }')
    kill "$VG_PID"
    wait "$VG_PID" 2>/dev/null || true
    VG_PID=
    ROWS[$1.$2]=-
    if [ "$1" = sqlite ]; then
        ROWS[$1.$2]=$(sqlite3 "$W/var/audit.db" 'select count(*) || "/" || sum(seen_count) from blocked_host_log')
    fi
    echo "$2 hosts, audit $1: ${RPS[$1.$2]} req/s, proxy CPU ${cpu}s of ${SECS}s, rows/blocks in store ${ROWS[$1.$2]} $(echo "$out" | awk '/Non-2xx/ { print "(" $0 ")" }')"
    grep '"level":"error"' "$W/vg.stderr" | head -3 || true
}

for mix in distinct repeated; do
    run off "$mix"
    run sqlite "$mix"
done

echo
printf '%-34s %10s %10s %14s\n' "" "off" "sqlite" "sqlite/off"
for mix in distinct repeated; do
    printf '%-34s %10s %10s %14s\n' "$mix hosts: req/s" "${RPS[off.$mix]}" "${RPS[sqlite.$mix]}" \
        "$(ratio "${RPS[sqlite.$mix]}" "${RPS[off.$mix]}")"
    printf '%-34s %10s %10s %14s\n' "$mix hosts: req/proxy-CPU-s" "${RPS_CPU[off.$mix]}" \
        "${RPS_CPU[sqlite.$mix]}" "$(ratio "${RPS_CPU[sqlite.$mix]}" "${RPS_CPU[off.$mix]}")"
done
exit 0
