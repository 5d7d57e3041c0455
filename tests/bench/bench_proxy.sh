#!/usr/bin/env bash
# bench_proxy.sh - vaultgate vs nginx, haproxy and mitmproxy as TLS-terminating, header-setting
# proxies (a benchmark, not a test). docs/benchmarks.md says how to read it.
#
# Every proxy: one worker/thread/process pinned to CPU $PROXY_CPU, TLS 1.3 with an ECDSA P-256
# leaf towards the client, the same Authorization header set on every request, keep-alive
# upstream connections, upstream TLS verified against a test CA. The upstream is nginx serving a
# 3-byte response over TLS, pinned to $LOAD_CPU together with the load generators. Loopback only.
# The proxies run one after the other, each freshly started, so none disturbs another.
#
# Measures, per proxy
#   idle memory             RSS growth over $MEM_CONNS idle keep-alive TLS connections that each
#                           served one request (tests/bench/idleclient.c), in KiB per connection;
#                           measured first, on the freshly started proxy
#   keep-alive requests/s   wrk -c$CONNS on persistent connections
#   full handshakes/s       tests/bench/hsclient.c: new connection, SNI, no session offered
#                           (resumed handshakes are counted and must be 0)
# and, for the rates, the proxy's own CPU seconds (utime+stime from /proc), so rates are also
# given per proxy CPU-second: on a small machine the load generator may saturate its core first.
#
# Usage: tests/bench/bench_proxy.sh [BUILD_DIR]
#   env: SECS=10 CONNS=64 HS_THREADS=4 MEM_CONNS=5000 MITM_MEM_CONNS=1000 PROXY_CPU=0 LOAD_CPU=1
#        VG_LOG_LEVEL=info PROXIES="nginx haproxy mitmproxy vaultgate" TESTS="mem ka hs"
#        VG=path/to/vaultgate (default BUILD_DIR/cli/vaultgate) PERF=/tmp/vg.perf (perf record
#        -g of vaultgate during keep-alive and handshakes) MEM_NOREQ=1 (idle connections after the
#        handshake only, no request) MEM_HOOK='cmd' (run while the idle
#        connections are held, with $MAIN_PID set)
# mitmproxy (Debian package) is installed with apt-get when missing; without it (or haproxy) that
# column is skipped.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
VG=${VG:-$BUILD/cli/vaultgate}
SECS=${SECS:-10}
CONNS=${CONNS:-64}
HS_THREADS=${HS_THREADS:-4}
MEM_CONNS=${MEM_CONNS:-5000}
MITM_MEM_CONNS=${MITM_MEM_CONNS:-1000}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
VG_LOG_LEVEL=${VG_LOG_LEVEL:-info}
PROXIES=${PROXIES:-nginx haproxy mitmproxy vaultgate}
TESTS=${TESTS:-mem ka hs}
UP_ADDR=127.0.0.93
SECRET="sk-bench-FAKE-secret"

[ -x "$VG" ] || { echo "no vaultgate at $VG" >&2; exit 1; }
for t in nginx wrk openssl taskset cc python3; do
    command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }
done
. "$SRC/tests/bench/lib.sh"
[[ " $PROXIES " == *" mitmproxy "* ]] && bench_need mitmdump mitmproxy
ACTIVE=()
for p in $PROXIES; do
    case $p in
    haproxy) command -v haproxy >/dev/null || { echo "no haproxy: skipped" >&2; continue; } ;;
    mitmproxy) command -v mitmdump >/dev/null || { echo "no mitmproxy: skipped" >&2; continue; } ;;
    esac
    ACTIVE+=("$p")
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

bench_workdir vgbench

# ---- certificates: test CA, upstream leaf, proxy leaf (all ECDSA P-256) ----
bench_ca bench-ca
bench_leaf up "DNS:api.example.test,IP:127.0.0.1,IP:$UP_ADDR"
bench_leaf px "IP:127.0.0.1"
cat px.pem ca.pem >px-chain.pem # leaf + issuer, like vaultgate's leaf + intermediate
cat px-chain.pem px.key >px-haproxy.pem
cc -O2 -o "$W/hsclient" "$SRC/tests/bench/hsclient.c" -lssl -lcrypto -lpthread
cc -O2 -o "$W/idleclient" "$SRC/tests/bench/idleclient.c" -lssl -lcrypto

# ---- upstream: nginx, static 3-byte answer over TLS ----
bench_upstream "$UP_ADDR" ok

# ---- the proxies under test: start_nginx, start_haproxy and start_vaultgate are in lib.sh ----
start_mitmproxy() {
    cat >mitm_addon.py <<EOF
def request(flow):
    flow.request.headers["Authorization"] = "Bearer $SECRET"
EOF
    mkdir -p mitm
    taskset -c "$PROXY_CPU" mitmdump -q --mode "reverse:https://$UP_ADDR:443" \
        --listen-host 127.0.0.1 --listen-port "$PORT" --set confdir="$W/mitm" \
        --set ssl_verify_upstream_trusted_ca="$W/ca.pem" -s mitm_addon.py >"$W/mitm.log" 2>&1 &
    MAIN_PID=$!
}
# curl sends no SNI for an IP literal; openssl s_client does (as wrk and hsclient do)
get() {
    printf 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' |
        timeout 5 openssl s_client -quiet -connect "127.0.0.1:$PORT" -servername 127.0.0.1 \
            2>/dev/null || true # s_client fails on a close without close_notify (mitmproxy)
}
TICK=$(getconf CLK_TCK)
declare -A RPS RPS_CPU CPS CPS_CPU MEM

bench_mem() { # name
    local n=$MEM_CONNS
    [ "$1" = mitmproxy ] && n=$MITM_MEM_CONNS
    idle_hold "$n" ${MEM_NOREQ:+handshake-only}
    MEM[$1]=$IDLE_KIB
    echo "$1 idle memory: $IDLE_LINE, RSS $IDLE_R0 -> $IDLE_R1 KiB, ${MEM[$1]} KiB/connection"
}
bench_ka() { # name
    local pids c0 c1 out errs cpu
    pids=$(proxy_pids)
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d2s "https://127.0.0.1:$PORT/" >/dev/null # warm-up
    c0=$(cpu_of $pids)
    if [ -n "${PERF:-}" ] && [ "$1" = vaultgate ]; then
        perf record -q -g -p "$MAIN_PID" -o "$PERF" -- sleep "$SECS" 2>/dev/null &
    fi
    out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${SECS}s" \
        -H "Authorization: Bearer placeholder" "https://127.0.0.1:$PORT/")
    c1=$(cpu_of $pids)
    RPS[$1]=$(echo "$out" | awk '/Requests\/sec/ { printf "%.0f", $2 }')
    errs=$(echo "$out" | awk '/Non-2xx|Socket errors/ { print }')
    cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
    RPS_CPU[$1]=$(awk -v r="${RPS[$1]}" -v s="$SECS" -v c="$cpu" \
        'BEGIN { printf "%.0f", (c > 0 ? r * s / c : 0) }')
    echo "$1 keep-alive: ${RPS[$1]} req/s, proxy CPU ${cpu}s of ${SECS}s ${errs:+($errs)}"
}
bench_hs() { # name
    local pids c0 c1 hs n cpu
    pids=$(proxy_pids)
    c0=$(cpu_of $pids)
    if [ -n "${PERF:-}" ] && [ "$1" = vaultgate ]; then
        perf record -q -g -p "$MAIN_PID" -o "$PERF.hs" -- sleep "$SECS" 2>/dev/null &
    fi
    hs=$(taskset -c "$LOAD_CPU" "$W/hsclient" 127.0.0.1 "$PORT" 127.0.0.1 "$SECS" "$HS_THREADS")
    c1=$(cpu_of $pids)
    CPS[$1]=$(echo "$hs" | awk '{ printf "%.0f", $10 }')
    n=$(echo "$hs" | awk '{ print $2 }')
    cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
    CPS_CPU[$1]=$(awk -v n="$n" -v c="$cpu" 'BEGIN { printf "%.0f", (c > 0 ? n / c : 0) }')
    echo "$1 full handshakes: $hs; proxy CPU ${cpu}s"
}

for name in "${ACTIVE[@]}"; do
    PORT=$(free_port)
    "start_$name"
    PIDS+=($MAIN_PID)
    for _ in $(seq ${START_TRIES:-150}); do
        get | grep ok >/dev/null && break
        sleep 0.2
    done
    if ! get | grep ok >/dev/null; then
        echo "$name not serving; skipped"
        kill "$MAIN_PID" 2>/dev/null || true
        continue
    fi
    for i in 1 2 3 4 5; do get >/dev/null; done
    [[ " $TESTS " == *" mem "* ]] && bench_mem "$name"
    [[ " $TESTS " == *" ka "* ]] && bench_ka "$name"
    [[ " $TESTS " == *" hs "* ]] && bench_hs "$name"
    [ "$name" = vaultgate ] && grep -q '"level":"error"' "$W/vg.stderr" &&
        { echo "vaultgate logged errors:"; grep '"level":"error"' "$W/vg.stderr" | head -5; }
    kill "$MAIN_PID" 2>/dev/null || true
    wait "$MAIN_PID" 2>/dev/null || true
done

echo
table_head
row "keep-alive req/s" RPS
row "keep-alive req/proxy-CPU-s" RPS_CPU
row "full handshakes/s" CPS
row "handshakes/proxy-CPU-s" CPS_CPU
row "idle KiB/conn (lower better)" MEM
exit 0
