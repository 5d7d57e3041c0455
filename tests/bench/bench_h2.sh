#!/usr/bin/env bash
# bench_h2.sh - vaultgate vs nginx and haproxy as TLS-terminating, header-setting proxies that
# speak HTTP/2 to the client (a benchmark, not a test). docs/benchmarks.md says how to read it.
#
# Every proxy: one worker/thread pinned to CPU $PROXY_CPU, ALPN h2 and TLS 1.3 with an ECDSA
# P-256 leaf towards the client (nginx and haproxy the same certificate, made at run time;
# vaultgate mints its own leaf of the same kind), "Authorization: Bearer <secret>" set on every
# request, keep-alive upstream connections verified against a test CA (nginx keeps up to
# $CLIENTS x $STREAMS idle ones, haproxy all, vaultgate what its pool keeps). vaultgate runs as a
# product would: a bearer rule (so its reflection masking runs), the SQLite audit store, info
# logging. Clients name the proxy api.example.test (h2load sends no SNI for an address) and
# connect to 127.0.0.1; nothing is resolved.
# The upstream is nginx serving a 3-byte response over TLS, pinned to $LOAD_CPU together with the
# load generator. It answers 401 to a request without the secret (and, as the h2 upstream, 426
# to one that did not come over HTTP/2), so every request h2load counts as 2xx went through the
# injection; /status is its stub_status. Upstream variants ($UPSTREAMS):
#   h1   HTTP/1.1 keep-alive upstream (bench_proxy.sh's), for all three proxies
#   h2   HTTP/2 upstream: vaultgate offers h2 and takes it, haproxy with "alpn h2" on its server
#        line; nginx is left out (its proxy module speaks HTTP/1.x upstream only)
# The proxies run one after the other, each freshly started per variant. Loopback only.
#
# Measures, per proxy
#   requests/s              h2load -c$CLIENTS -m$STREAMS for $SECS s, after a $WARMUP s warm-up run
#   proxy CPU seconds       utime+stime of the proxy's processes (/proc) during the measured run,
#                           and requests (2xx) per proxy CPU-second
#   upstream connections    opened during the measured run (the upstream's stub_status accepts),
#                           and those established halfway through it
#   idle memory             RSS growth over $MEM_CONNS idle h2 connections (tests/bench/idleclient.c
#                           mode $MEM_MODE: TLS, ALPN h2, preface and SETTINGS exchanged; h2-get
#                           also one GET), in KiB per connection; on the freshly started proxy of
#                           the first variant
#
# Usage: tests/bench/bench_h2.sh [BUILD_DIR]
#   env: SECS=10 WARMUP=2 CLIENTS=10 STREAMS=100 MEM_CONNS=1000 MEM_MODE=h2 PROXY_CPU=0
#        LOAD_CPU=1 VG_LOG_LEVEL=info VG_AUDIT=sqlite (or off) PROXIES="nginx haproxy vaultgate"
#        UPSTREAMS="h1 h2" TESTS="mem rate" VG=path/to/vaultgate (default BUILD_DIR/cli/vaultgate)
#        PERF=/tmp/vg.perf (perf record -g of vaultgate during each measured run: PERF.h1,
#        PERF.h2; PERF_ARGS="--call-graph dwarf -F 499" for stacks through libraries built
#        without frame pointers) MEM_HOOK='cmd' (run while the idle connections are held,
#        $MAIN_PID set) KEEP=1
# h2load (nghttp2-client), nginx and haproxy are installed with apt-get when missing.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
VG=${VG:-$BUILD/cli/vaultgate}
SECS=${SECS:-10}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-10}
STREAMS=${STREAMS:-100}
MEM_CONNS=${MEM_CONNS:-1000}
MEM_MODE=${MEM_MODE:-h2}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
VG_LOG_LEVEL=${VG_LOG_LEVEL:-info}
PROXIES=${PROXIES:-nginx haproxy vaultgate}
UPSTREAMS=${UPSTREAMS:-h1 h2}
TESTS=${TESTS:-mem rate}
SECRET="sk-bench-FAKE-secret"
PX_HOST=api.example.test
declare -A UP_ADDRS=([h1]=127.0.0.93 [h2]=127.0.0.94)

[ -x "$VG" ] || { echo "no vaultgate at $VG" >&2; exit 1; }
. "$SRC/tests/bench/lib.sh"
bench_need h2load nghttp2-client
bench_need nginx nginx
[[ " $PROXIES " == *" haproxy "* ]] && bench_need haproxy haproxy
for t in h2load nginx openssl taskset cc python3; do
    command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }
done
ACTIVE=()
for p in $PROXIES; do
    [ "$p" = haproxy ] && ! command -v haproxy >/dev/null && { echo "no haproxy: skipped" >&2; continue; }
    ACTIVE+=("$p")
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

bench_workdir vgh2bench
VG_AUDIT=${VG_AUDIT:-sqlite}

# ---- certificates: test CA, upstream leaf, proxy leaf (all ECDSA P-256) ----
bench_ca bench-ca
bench_leaf up "DNS:api.example.test,IP:127.0.0.1,IP:${UP_ADDRS[h1]},IP:${UP_ADDRS[h2]}"
bench_leaf px "DNS:$PX_HOST,IP:127.0.0.1"
cat px.pem ca.pem >px-chain.pem # leaf + issuer, like vaultgate's leaf + intermediate
cat px-chain.pem px.key >px-haproxy.pem
cc -O2 -o "$W/idleclient" "$SRC/tests/bench/idleclient.c" -lssl -lcrypto

# ---- upstreams: nginx, static 3-byte answer over TLS, 401 without the injected secret ----
AUTH_CHECK="if (\$http_authorization != \"Bearer $SECRET\") { return 401; }
        location = /status { stub_status; }"
for u in $UPSTREAMS; do
    case $u in
    h1) bench_upstream "${UP_ADDRS[h1]}" ok "" "$AUTH_CHECK" ;;
    h2) bench_upstream "${UP_ADDRS[h2]}" ok http2 \
        "$AUTH_CHECK if (\$server_protocol != \"HTTP/2.0\") { return 426; }" ;;
    *) echo "unknown upstream variant $u" >&2; exit 2 ;;
    esac
done

# the proxies: start_nginx, start_haproxy, start_vaultgate (lib.sh), here with h2 to the client
NGX_KEEPALIVE=${NGX_KEEPALIVE:-$((CLIENTS * STREAMS))}
export NGX_LISTEN=http2 NGX_KEEPALIVE HAP_BIND="alpn h2,http/1.1" VG_AUDIT VG_LOG_LEVEL PX_HOST

# h2load ARGS...: on $LOAD_CPU against the proxy, with a placeholder credential to be replaced
h2load_run() {
    taskset -c "$LOAD_CPU" h2load -H "authorization: Bearer placeholder" "$@" \
        --connect-to "127.0.0.1:$PORT" "https://$PX_HOST:$PORT/" 2>&1 || true
}
up_accepts() { # connections the upstream has accepted so far
    curl -sk --http2 -H "authorization: Bearer $SECRET" "https://$UP_ADDR/status" |
        awk '$1 ~ /^[0-9]+$/ && NF == 3 { print $1 }'
}
serving() { # one request answered 2xx over h2
    local out
    out=$(h2load_run -n 1 -c 1)
    [[ "$out" == *"Application protocol: h2"* && "$out" == *"status codes: 1 2xx"* ]]
}
TICK=$(getconf CLK_TCK)
declare -A MEM
for u in $UPSTREAMS; do declare -A "RPS_$u" "CPU_$u" "RPC_$u" "UPN_$u"; done

bench_mem() { # name
    idle_hold "$MEM_CONNS" "$MEM_MODE"
    MEM[$1]=$IDLE_KIB
    echo "$1 idle memory ($MEM_MODE): $IDLE_LINE, RSS $IDLE_R0 -> $IDLE_R1 KiB, ${MEM[$1]} KiB/connection"
}
bench_rate() { # name variant
    local pids c0 c1 a0 a1 out ok bad cpu rps upc perf_pid=
    pids=$(proxy_pids)
    h2load_run -c "$CLIENTS" -m "$STREAMS" -D "$WARMUP" >/dev/null
    a0=$(up_accepts)
    c0=$(cpu_of $pids)
    if [ -n "${PERF:-}" ] && [ "$1" = vaultgate ]; then
        perf record -q ${PERF_ARGS:--g} -p "$MAIN_PID" -o "$PERF.$2" -- sleep "$SECS" 2>/dev/null &
        perf_pid=$!
    fi
    (sleep "$(awk -v s="$SECS" 'BEGIN { print s / 2 }')"
     ss -Htn state established dst "$UP_ADDR" dport = 443 | wc -l >"$W/upconns") &
    out=$(h2load_run -c "$CLIENTS" -m "$STREAMS" -D "$SECS")
    c1=$(cpu_of $pids)
    a1=$(up_accepts)
    wait $! $perf_pid 2>/dev/null || true
    upc=$(cat "$W/upconns")
    printf -v "UPN_$2[$1]" '%s' "$((a1 - a0 - 1))" # less the status request's own
    rps=$(echo "$out" | awk '/^finished in/ { sub(",", "", $4); printf "%.0f", $4 }')
    ok=$(echo "$out" | awk '/^status codes:/ { print $3 }')
    bad=$(echo "$out" | awk '/^requests:/ { f = $10 + $12 + $14 } /^status codes:/ { n = $5 + $7 + $9 }
        END { if (f + n > 0) printf "%d failed/errored/timed out, %d not 2xx", f, n }')
    cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
    printf -v "RPS_$2[$1]" '%s' "${rps:-0}"
    printf -v "CPU_$2[$1]" '%s' "$cpu"
    printf -v "RPC_$2[$1]" '%s' "$(awk -v n="${ok:-0}" -v c="$cpu" \
        'BEGIN { printf "%.0f", (c > 0 ? n / c : 0) }')"
    echo "$1 ($2 upstream): ${rps:-?} req/s, ${ok:-0} answered 2xx, proxy CPU ${cpu}s of ${SECS}s," \
        "upstream connections: $((a1 - a0 - 1)) opened, $upc open halfway${bad:+ ($bad)}"
    [ -n "$bad" ] && echo "$out" | grep -E '^(requests|status codes):' | sed 's/^/    /'
    return 0
}
# vaultgate's own account of the run: error lines and the audit store's route counts
vg_report() {
    vg_log_errors
    [[ "$(vg_audit_url)" == sqlite:* ]] && echo "vaultgate audit store, egress_route_log:" &&
        "$VG" audit --store "$(vg_audit_url)" routes 2>&1 | sed 's/^/    /'
    return 0
}

first=${UPSTREAMS%% *}
for u in $UPSTREAMS; do
    UP_ADDR=${UP_ADDRS[$u]}
    HAP_SERVER=
    [ "$u" = h2 ] && HAP_SERVER="alpn h2"
    export UP_ADDR HAP_SERVER
    for name in "${ACTIVE[@]}"; do
        if [ "$u" = h2 ] && [ "$name" = nginx ]; then
            echo "nginx (h2 upstream): left out, proxy_pass speaks HTTP/1.x upstream only"
            continue
        fi
        PORT=$(free_port)
        rm -rf "$W/var"
        "start_$name"
        PIDS+=($MAIN_PID)
        for _ in $(seq 150); do serving && break; sleep 0.2; done
        if ! serving; then
            echo "$name ($u upstream) not serving over h2; skipped"
            kill "$MAIN_PID" 2>/dev/null || true
            continue
        fi
        [[ " $TESTS " == *" mem "* && "$u" = "$first" ]] && bench_mem "$name"
        [[ " $TESTS " == *" rate "* ]] && bench_rate "$name" "$u"
        kill "$MAIN_PID" 2>/dev/null || true
        wait "$MAIN_PID" 2>/dev/null || true
        [ "$name" = vaultgate ] && vg_report
    done
done

echo
table_head
for u in $UPSTREAMS; do
    row "h2 req/s ($u upstream)" "RPS_$u"
    row "proxy CPU-s ($u upstream)" "CPU_$u"
    row "req/proxy-CPU-s ($u upstream)" "RPC_$u"
    row "upstream conns opened ($u up.)" "UPN_$u"
done
[[ " $TESTS " == *" mem "* ]] && row "idle KiB/conn (lower better)" MEM
exit 0
