#!/usr/bin/env bash
# bench_proxy.sh - vaultgate vs nginx, haproxy and mitmproxy as TLS-terminating, header-setting
# proxies (a benchmark, not a test). docs/benchmarks.md says how to read it.
#
# Every proxy: one worker/thread/process pinned to CPU $PROXY_CPU, TLS 1.3 with an ECDSA P-256
# leaf towards the client, the same Authorization header set on every request, keep-alive
# upstream connections, upstream TLS verified against a test CA. The upstream is nginx over TLS
# serving a 3-byte answer at / and a 1 MiB one at /big.bin, pinned to $LOAD_CPU together with the
# load generators. vaultgate runs as a product would: a bearer rule (so its reflection masking
# runs on every answer), the SQLite audit store; "vaultgate" logs at $VG_LOG_LEVEL (the default,
# info) and "vgwarn" is the same build at --log-level warn. Loopback only. The proxies run one
# after the other, each freshly started, so none disturbs another.
#
# Measures, per proxy
#   mem   idle memory: RSS growth over $MEM_CONNS idle keep-alive TLS connections that each served
#         one request (tests/bench/idleclient.c), in KiB per connection; measured first, on the
#         freshly started proxy
#   ka    keep-alive requests/s: wrk -c$CONNS on persistent connections
#   hs    full handshakes/s: tests/bench/hsclient.c, new connection, SNI, no session offered
#         (resumed handshakes are counted and must be 0)
#   rs    resumed handshakes/s: the same, each connection offering a TLS 1.3 ticket (every
#         handshake must resume)
#   bulk  MiB/s of 1 MiB answers: wrk -c$BULK_CONNS on persistent connections, GET /big.bin
#   h2    HTTP/2 requests/s: h2load -c$H2_CLIENTS -m$H2_STREAMS GET $H2_PATH (nginx listens
#         with http2, haproxy with alpn h2; mitmproxy is left out); with H2_WRITES=1 also the
#         proxy's SSL_write calls per request (a uprobe on libssl, added when missing); with
#         H2_CALLS="read write epoll_wait ..." the proxy's calls of each per request and the
#         machine's TCP segments sent per request (nstat TcpOutSegs: loopback, both directions)
#   calls system calls and libc allocations (malloc+calloc+realloc) per keep-alive request:
#         perf stat (raw_syscalls:sys_enter and uprobes on libc, added with perf probe when
#         missing) on the proxy while h2load --h1 sends $CALLS_N requests on $CONNS connections
#         (not in the default TESTS: the uprobes slow every process that allocates)
#   hscalls accept4, epoll_ctl, epoll_wait, read, write, recvfrom and sendto per full and per
#         resumed handshake: perf stat (syscalls:sys_enter_* tracepoints) on the proxy while
#         hsclient runs as in hs and rs (not in the default TESTS; counts, not rates: they hold
#         on a loaded machine); HC_EVENTS="probe_libc:malloc probe_libc:free" counts those
#         perf events per handshake too (any event perf stat knows, by name)
# and, for the rates, the proxy's own CPU seconds (utime+stime from /proc), so rates are also
# given per proxy CPU-second: on a small machine the load generator may saturate its core first.
#
# Usage: tests/bench/bench_proxy.sh [BUILD_DIR]
#   env: SECS=10 CONNS=64 HS_THREADS=4 BULK_CONNS=4 H2_CLIENTS=10 H2_STREAMS=100 MEM_CONNS=5000
#        MITM_MEM_CONNS=1000 PROXY_CPU=0 LOAD_CPU=1 VG_LOG_LEVEL=info VG_AUDIT=sqlite (or off)
#        UP_ADDR=127.0.0.93 (the upstream's loopback address: another for a second run at once)
#        PROXIES="nginx haproxy mitmproxy vaultgate vgwarn" TESTS="mem ka hs rs bulk h2"
#        VG=path/to/vaultgate (default BUILD_DIR/cli/vaultgate) PERF=/tmp/vg.perf (perf record
#        -g of vaultgate during each test: PERF.ka, PERF.hs, ...; PERF_ARGS="--call-graph dwarf
#        -e probe_libc:malloc" for other events than -g's cycles; PERF_PROXIES="vaultgate nginx"
#        records those proxies, the others into PERF.NAME.ka, ...) MEM_NOREQ=1 (idle connections
#        after the handshake only, no request) MEM_HOOK='cmd' (run while the idle connections are
#        held, with $MAIN_PID set) VG_THREADS=1 NGX_WORKERS=1 HAP_THREADS=1 (2 each, with
#        PROXY_CPU=0,1 LOAD_CPU=0,1 LOAD_NICE=10 WRK_THREADS=2, for the two-core run)
#        NGX_SUITES="TLS_AES_128_GCM_SHA256:..." (the TLS 1.3 suites nginx prefers, towards the
#        client and the upstream; default OpenSSL's, so nginx serves the client's first choice,
#        TLS_AES_256_GCM_SHA384; each proxy's negotiated suite is printed when it first starts)
#        NGX_ACCESS_LOG=json (nginx writes a line per request as vaultgate does at info, with
#        its fields, to px/access.log; "combined" for nginx's own default format; default off)
#        INTERLEAVE=1 (each test on every proxy in turn, each proxy freshly started for it,
#        instead of every test on one proxy before the next: a test's ratios then compare runs
#        minutes apart, not a whole proxy's series apart, on a machine whose speed drifts)
#        PAIRS=N (every proxy started once per test and kept up, then N turns of SLICE=3 s each,
#        the proxies' order reversed every other turn, warm-ups in the first only: each turn's
#        ratios compare runs seconds apart, and the table shows each figure's median over the
#        turns, as ROUNDS does; mem, calls and hscalls run once per proxy)
#        ROUNDS=N (interleaved, N rounds, the proxies' order turned by one each round: the table
#        shows each figure's median over the rounds, and the ratios of each round are listed
#        after it, with their median and spread)
# nginx (nginx-light), wrk, haproxy, mitmproxy and h2load (nghttp2-client) are installed with
# apt-get when missing; without haproxy, mitmproxy or h2load that column or row is skipped.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
VG=${VG:-$BUILD/cli/vaultgate}
SECS=${SECS:-10}
SLICE=${SLICE:-3}
CONNS=${CONNS:-64}
HS_THREADS=${HS_THREADS:-4}
BULK_CONNS=${BULK_CONNS:-4}
WRK_THREADS=${WRK_THREADS:-1}
H2_CLIENTS=${H2_CLIENTS:-10}
H2_STREAMS=${H2_STREAMS:-100}
H2_PATH=${H2_PATH:-/} # /big.bin: 1 MiB answers over HTTP/2
CALLS_N=${CALLS_N:-20000}
MEM_CONNS=${MEM_CONNS:-5000}
MITM_MEM_CONNS=${MITM_MEM_CONNS:-1000}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
VG_LOG_LEVEL=${VG_LOG_LEVEL:-info}
PROXIES=${PROXIES:-nginx haproxy mitmproxy vaultgate vgwarn}
TESTS=${TESTS:-mem ka hs rs bulk h2}
UP_ADDR=${UP_ADDR:-127.0.0.93} # two benchmarks at once need two addresses
SECRET="sk-bench-FAKE-secret"

[ -x "$VG" ] || { echo "no vaultgate at $VG" >&2; exit 1; }
. "$SRC/tests/bench/lib.sh"
bench_need nginx nginx-light
bench_need wrk wrk
[[ " $PROXIES " == *" haproxy "* ]] && bench_need haproxy haproxy
for t in nginx wrk openssl taskset cc python3; do
    command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }
done
[[ " $PROXIES " == *" mitmproxy "* ]] && bench_need mitmdump mitmproxy
[[ " $TESTS " == *" h2 "* ]] && bench_need h2load nghttp2-client
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
VG_AUDIT=${VG_AUDIT:-sqlite}
# h2load sends no SNI for an address: it names the proxy api.example.test (nothing is resolved:
# it connects to 127.0.0.1), which vaultgate gets a second bearer rule for
PX_HOST2=api.example.test
# nginx and haproxy offer h2 by ALPN (wrk and hsclient offer no ALPN, so they speak HTTP/1.1)
NGX_LISTEN=${NGX_LISTEN-http2}
NGX_KEEPALIVE=${NGX_KEEPALIVE:-$((H2_CLIENTS * H2_STREAMS))} # idle upstream connections kept
HAP_BIND=${HAP_BIND-alpn h2,http/1.1}

# ---- certificates: test CA, upstream leaf, proxy leaf (all ECDSA P-256) ----
bench_ca bench-ca
bench_leaf up "DNS:api.example.test,IP:127.0.0.1,IP:$UP_ADDR"
bench_leaf px "IP:127.0.0.1"
cat px.pem ca.pem >px-chain.pem # leaf + issuer, like vaultgate's leaf + intermediate
cat px-chain.pem px.key >px-haproxy.pem
cc -O2 -o "$W/hsclient" "$SRC/tests/bench/hsclient.c" -lssl -lcrypto -lpthread
cc -O2 -o "$W/idleclient" "$SRC/tests/bench/idleclient.c" -lssl -lcrypto

# ---- upstream: nginx over TLS, a 3-byte answer at / and 1 MiB of random bytes at /big.bin ----
mkdir -p www
head -c 1048576 /dev/urandom >www/big.bin
chmod 711 "$W" && chmod 755 www && chmod 644 www/big.bin # nginx's worker runs as nobody
bench_upstream "$UP_ADDR" ok "" "location = /big.bin { root $W/www; }"

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
# load_gen CMD...: a load generator, on $LOAD_CPU at nice $LOAD_NICE
load_gen() { nice -n "${LOAD_NICE:-0}" taskset -c "$LOAD_CPU" "$@"; }
# the same build at warn, with its own state, audit store and log (PAIRS runs both at once)
vg_tag() { [ "$1" != vgwarn ] || echo -warn; }
start_vgwarn() { VG_LOG_LEVEL=warn VG_TAG=$(vg_tag vgwarn) start_vaultgate; }

TICK=$(getconf CLK_TCK)
declare -A SUITE RPS RPS_CPU CPS CPS_CPU RCPS RCPS_CPU BULK BULK_CPU H2 H2_CPU MEM SYSC ALLOC

# perf_start NAME TEST: perf record -g of each proxy in $PERF_PROXIES (vaultgate by default) for
# $SECS s: vaultgate into $PERF.TEST, another proxy into $PERF.NAME.TEST (all its processes)
perf_start() {
    local out pids
    [ -n "${PERF:-}" ] || return 0
    case " ${PERF_PROXIES:-vaultgate} " in *" $1 "*) ;; *) return 0 ;; esac
    out=$PERF.$1.$2
    [ "$1" = vaultgate ] && out=$PERF.$2
    pids=$(proxy_pids | tr -s ' ' ',' | sed 's/,$//')
    # shellcheck disable=SC2086 # PERF_ARGS: words for perf record
    perf record -q ${PERF_ARGS:--g} -p "$pids" -o "$out" -- sleep "$SECS" 2>/dev/null &
}
# per_cpu C0 C1 COUNT: sets CPU (the proxy's CPU seconds, from ticks C0 -> C1) and PER (COUNT per
# proxy CPU-second)
per_cpu() {
    CPU=$(awk -v a="$1" -v b="$2" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
    PER=$(awk -v n="$3" -v c="$CPU" 'BEGIN { printf "%.0f", (c > 0 ? n / c : 0) }')
}

bench_mem() { # name
    local n=$MEM_CONNS
    [ "$1" = mitmproxy ] && n=$MITM_MEM_CONNS
    idle_hold "$n" ${MEM_NOREQ:+handshake-only}
    MEM[$1]=$IDLE_KIB
    echo "$1 idle memory: $IDLE_LINE, RSS $IDLE_R0 -> $IDLE_R1 KiB, ${MEM[$1]} KiB/connection"
}
# wrk_run NAME TEST CONNS PATH: wrk on persistent connections after a 2 s warm-up; sets WRK_RPS
# (requests/s), WRK_N (requests), WRK_OUT, CPU (the proxy's CPU seconds) and PER (requests per
# proxy CPU-second)
wrk_run() {
    local pids c0 c1 errs
    pids=$(proxy_pids)
    [ "${WARMED:-0}" = 1 ] || # warm-up
        load_gen wrk -t"$WRK_THREADS" -c"$3" -d2s "https://127.0.0.1:$PORT$4" >/dev/null
    c0=$(cpu_of $pids)
    perf_start "$1" "$2"
    WRK_OUT=$(load_gen wrk -t"$WRK_THREADS" -c"$3" -d"${SECS}s" \
        -H "Authorization: Bearer placeholder" "https://127.0.0.1:$PORT$4")
    c1=$(cpu_of $pids)
    WRK_RPS=$(echo "$WRK_OUT" | awk '/Requests\/sec/ { printf "%.2f", $2 }')
    WRK_N=$(echo "$WRK_OUT" | awk '/requests in/ { print $1 }')
    per_cpu "$c0" "$c1" "$WRK_N"
    errs=$(echo "$WRK_OUT" | awk '/Non-2xx|Socket errors/ { print }')
    [ -z "$errs" ] || echo "$1 $2: $errs"
}
bench_ka() { # name
    wrk_run "$1" ka "$CONNS" /
    RPS[$1]=$(printf '%.0f' "$WRK_RPS")
    RPS_CPU[$1]=$PER
    echo "$1 keep-alive: ${RPS[$1]} req/s, proxy CPU ${CPU}s of ${SECS}s"
}
bench_bulk() { # name: 1 MiB answers, MiB/s
    wrk_run "$1" bulk "$BULK_CONNS" /big.bin
    BULK[$1]=$(printf '%.0f' "$WRK_RPS")
    BULK_CPU[$1]=$PER
    echo "$1 bulk: ${BULK[$1]} MiB/s, proxy CPU ${CPU}s of ${SECS}s"
}
bench_calls() { # name: system calls and allocations per keep-alive request
    local libc out n
    command -v h2load >/dev/null && command -v perf >/dev/null || return 0
    libc=$(ldd "$(command -v nginx)" | awk '/libc.so/ { print $3 }')
    perf probe -l 2>/dev/null | grep 'probe_libc:malloc ' >/dev/null ||
        perf probe -q -x "$libc" -a malloc -a calloc -a realloc 2>/dev/null || return 0
    load_gen h2load --h1 -n 2000 -c"$CONNS" --connect-to "127.0.0.1:$PORT" \
        "https://$PX_HOST2:$PORT/" >/dev/null 2>&1 || true
    perf stat -x, -e raw_syscalls:sys_enter,probe_libc:malloc,probe_libc:calloc \
        -e probe_libc:realloc -p "$(proxy_pids | tr ' ' ',' | sed 's/,*$//')" -o "$W/calls.txt" &
    local sp=$!
    sleep 0.5
    out=$(load_gen h2load --h1 -n "$CALLS_N" -c"$CONNS" -H "authorization: Bearer placeholder" \
        --connect-to "127.0.0.1:$PORT" "https://$PX_HOST2:$PORT/" 2>&1 || true)
    kill -INT $sp 2>/dev/null || true
    wait $sp 2>/dev/null || true
    n=$(echo "$out" | awk '/^status codes:/ { gsub(",", ""); print $3 }')
    SYSC[$1]=$(awk -F, -v n="${n:-0}" '/sys_enter/ { printf "%.1f", (n > 0 ? $1 / n : 0) }' "$W/calls.txt")
    ALLOC[$1]=$(awk -F, -v n="${n:-0}" '/probe_libc/ { a += $1 } END { printf "%.1f", (n > 0 ? a / n : 0) }' "$W/calls.txt")
    echo "$1 per request: ${SYSC[$1]} system calls, ${ALLOC[$1]} allocations (${n:-0} requests)"
}
HC_CALLS="accept4 epoll_ctl epoll_wait read write recvfrom sendto"
HC_EVENTS=${HC_EVENTS:-}
# a perf event as it is counted (a system call's tracepoint, or an event of HC_EVENTS as named),
# and the name of its per-handshake table's variable
hc_event() { case $1 in *:*) echo "$1" ;; *) echo "syscalls:sys_enter_$1" ;; esac; }
hc_var() { echo "HC_${1}_${2//[^a-zA-Z0-9_]/_}"; }
for c in $HC_CALLS $HC_EVENTS; do declare -A "$(hc_var full "$c")" "$(hc_var res "$c")"; done
bench_hscalls() { # name: system calls per full and per resumed handshake (hsclient)
    local ev kind sp n c line
    command -v perf >/dev/null || return 0
    ev=$(for c in $HC_CALLS $HC_EVENTS; do printf '%s,' "$(hc_event "$c")"; done)
    for kind in full res; do
        perf stat -x, -e "${ev%,}" -p "$(proxy_pids | tr ' ' ',' | sed 's/,*$//')" \
            -o "$W/hscalls.txt" &
        sp=$!
        sleep 0.5
        hs_run "$1" "hscalls" $([ "$kind" = res ] && echo resume)
        kill -INT $sp 2>/dev/null || true
        wait $sp 2>/dev/null || true
        n=$(echo "$HS_LINE" | awk '{ print $2 }')
        line=""
        for c in $HC_CALLS $HC_EVENTS; do
            printf -v "$(hc_var "$kind" "$c")[$1]" '%s' "$(awk -F, -v n="${n:-0}" \
                -v e="$(hc_event "$c")" '$3 == e { printf "%.2f", (n > 0 ? $1 / n : 0) }' \
                "$W/hscalls.txt")"
            local -n cnt="$(hc_var "$kind" "$c")"
            line+=" $c ${cnt[$1]}"
            unset -n cnt
        done
        echo "$1 per $kind handshake (${n:-0}):$line"
    done
}
# dials_start NAME / dials_end NAME N: the proxy's connect(2) calls (its upstream connections
# opened) between the two, printed, with perf when there is one; and its libc allocations per
# request (of N) with H2_ALLOCS=1 when the uprobes of bench_calls are there (they slow every
# allocation down: the rates of such a run are not comparable)
dials_start() {
    local ev=syscalls:sys_enter_connect
    DIALS_PID=""
    command -v perf >/dev/null || return 0
    [ "${H2_ALLOCS:-0}" = 1 ] && perf probe -l 2>/dev/null | grep 'probe_libc:malloc ' >/dev/null &&
        ev="$ev,probe_libc:malloc,probe_libc:calloc,probe_libc:realloc"
    if [ "${H2_WRITES:-0}" = 1 ]; then
        perf probe -l 2>/dev/null | grep 'probe_libssl:SSL_write ' >/dev/null ||
            perf probe -q -x "$(ldd "$(command -v nginx)" | awk '/libssl.so/ { print $3 }')" \
                -a SSL_write 2>/dev/null || true
        perf probe -l 2>/dev/null | grep 'probe_libssl:SSL_write ' >/dev/null &&
            ev="$ev,probe_libssl:SSL_write"
    fi
    local c
    for c in ${H2_CALLS:-}; do ev="$ev,syscalls:sys_enter_$c"; done
    DIALS_SEGS=$(nstat -az TcpOutSegs 2>/dev/null | awk '/TcpOutSegs/ { print $2 }')
    perf stat -x, -e "$ev" -p "$(proxy_pids | xargs | tr " " ,)" -o "$W/dials.$1" 2>/dev/null &
    DIALS_PID=$!
}
dials_end() {
    local allocs segs
    [ -n "$DIALS_PID" ] || return 0
    kill -INT "$DIALS_PID" 2>/dev/null || true
    wait "$DIALS_PID" 2>/dev/null || true
    allocs=$(awk -F, -v n="${2:-0}" '/probe_libc/ { a += $1; p = 1 }
        /probe_libssl:SSL_write/ { w = $1; q = 1 }
        END { if (p && n > 0) printf ", %.1f allocations per request", a / n
              if (q && n > 0) printf ", %.2f SSL_write per request", w / n }' "$W/dials.$1")
    echo "$1 upstream connections opened: $(awk -F, '/sys_enter_connect/ { print $1 }' \
        "$W/dials.$1")$allocs"
    [ -n "${H2_CALLS:-}" ] || return 0
    segs=$(nstat -az TcpOutSegs 2>/dev/null | awk '/TcpOutSegs/ { print $2 }')
    echo "$1 per request:$(awk -F, -v n="${2:-0}" '/syscalls:sys_enter_/ && !/connect/ {
        e = $3; sub("syscalls:sys_enter_", "", e); printf " %s %.2f", e, (n > 0 ? $1 / n : 0) }' \
        "$W/dials.$1"), TCP segments $(awk -v a="${DIALS_SEGS:-0}" -v b="${segs:-0}" \
        -v n="${2:-0}" 'BEGIN { printf "%.2f", (n > 0 ? (b - a) / n : 0) }') (the machine's)"
}
bench_h2() { # name: h2load, after a 2 s warm-up run
    local pids c0 c1 out n
    [ "$1" = mitmproxy ] && return 0
    command -v h2load >/dev/null || return 0
    pids=$(proxy_pids)
    [ "${WARMED:-0}" = 1 ] || load_gen h2load -D 2 -c"$H2_CLIENTS" -m"$H2_STREAMS" \
        --connect-to "127.0.0.1:$PORT" "https://$PX_HOST2:$PORT$H2_PATH" >/dev/null 2>&1 || true
    c0=$(cpu_of $pids)
    perf_start "$1" h2
    dials_start "$1"
    out=$(load_gen h2load -D "$SECS" -c"$H2_CLIENTS" -m"$H2_STREAMS" \
        -H "authorization: Bearer placeholder" --connect-to "127.0.0.1:$PORT" \
        "https://$PX_HOST2:$PORT$H2_PATH" 2>&1 || true)
    c1=$(cpu_of $pids)
    n=$(echo "$out" | awk '/^status codes:/ { gsub(",", ""); print $3 }')
    dials_end "$1" "${n:-0}"
    H2[$1]=$(awk -v n="${n:-0}" -v s="$SECS" 'BEGIN { printf "%.0f", n / s }')
    per_cpu "$c0" "$c1" "${n:-0}"
    H2_CPU[$1]=$PER
    echo "$1 h2: ${H2[$1]} 2xx/s, proxy CPU ${CPU}s of ${SECS}s; $(echo "$out" | grep '^requests:')"
}
# hs_run NAME TEST [resume]: hsclient for $SECS s; sets HS_RATE, HS_PER_CPU and HS_LINE
hs_run() {
    local pids c0 c1 n
    pids=$(proxy_pids)
    c0=$(cpu_of $pids)
    perf_start "$1" "$2"
    HS_LINE=$(load_gen "$W/hsclient" 127.0.0.1 "$PORT" 127.0.0.1 "$SECS" \
        "$HS_THREADS" ${3:-})
    c1=$(cpu_of $pids)
    HS_RATE=$(echo "$HS_LINE" | awk '{ printf "%.0f", $10 }')
    n=$(echo "$HS_LINE" | awk '{ print $2 }')
    per_cpu "$c0" "$c1" "$n"
    HS_PER_CPU=$PER
}
bench_hs() { # name
    hs_run "$1" hs
    CPS[$1]=$HS_RATE
    CPS_CPU[$1]=$HS_PER_CPU
    echo "$1 full handshakes: $HS_LINE; proxy CPU ${CPU}s"
}
bench_rs() { # name
    hs_run "$1" rs resume
    RCPS[$1]=$HS_RATE
    RCPS_CPU[$1]=$HS_PER_CPU
    echo "$1 resumed handshakes: $HS_LINE; proxy CPU ${CPU}s"
}

# proxy_up NAME: starts the proxy freshly and waits until it serves (1: it did not, skipped)
proxy_up() {
    PORT=$(free_port)
    "start_$1"
    PIDS+=($MAIN_PID)
    for _ in $(seq ${START_TRIES:-150}); do
        get | grep ok >/dev/null && break
        sleep 0.2
    done
    if ! get | grep ok >/dev/null; then
        echo "$1 not serving; skipped"
        kill "$MAIN_PID" 2>/dev/null || true
        return 1
    fi
    for i in 1 2 3 4 5; do get >/dev/null; done
    [ -n "${SUITE[$1]:-}" ] && return 0
    SUITE[$1]=$(timeout 5 openssl s_client -connect "127.0.0.1:$PORT" -servername 127.0.0.1 \
        </dev/null 2>/dev/null | awk '/^New, / { print $2, $NF; exit }' || true)
    echo "$1 TLS towards the client: ${SUITE[$1]:-unknown}"
}
proxy_down() { # NAME
    vg_col "$1" && vg_log_errors "$(vg_tag "$1")"
    kill "$MAIN_PID" 2>/dev/null || true
    wait "$MAIN_PID" 2>/dev/null || true
}
ORDERED=()
for t in mem ka hs rs bulk h2 calls hscalls; do
    [[ " $TESTS " == *" $t "* ]] && ORDERED+=("$t")
done

ROUNDS=${ROUNDS:-1}
declare -A HIST
RATE_ROWS="RPS_CPU:keep-alive CPS_CPU:full-handshakes RCPS_CPU:resumed-handshakes BULK_CPU:bulk H2_CPU:h2 MEM:idle-KiB"
# After a round: each figure goes into HIST ("array:proxy" -> " v1 v2 ...") and out of its array,
# so that a test skipped in a later round shows no figure of an earlier one.
round_done() {
    local m p
    for m in RPS RPS_CPU CPS CPS_CPU RCPS RCPS_CPU BULK BULK_CPU H2 H2_CPU MEM; do
        declare -n fig=$m
        for p in "${ACTIVE[@]}"; do
            [ -n "${fig[$p]:-}" ] && HIST[$m:$p]+=" ${fig[$p]}"
            unset "fig[$p]"
        done
    done
}
median() { # numbers on stdin, one a line
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%.10g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# The medians back into the arrays (for the table), and each round's ratios of every
# vaultgate column to every other proxy, per proxy CPU-second (and idle memory).
rounds_report() {
    local m p v row label a b
    for m in RPS RPS_CPU CPS CPS_CPU RCPS RCPS_CPU BULK BULK_CPU H2 H2_CPU MEM; do
        declare -n fig=$m
        for p in "${ACTIVE[@]}"; do
            [ -n "${HIST[$m:$p]:-}" ] && fig[$p]=$(tr ' ' '\n' <<<"${HIST[$m:$p]}" | grep . | median)
        done
    done
    echo
    echo "ratios of each of the $ROUNDS rounds (median; lowest-highest):"
    for row in $RATE_ROWS; do
        m=${row%%:*} label=${row#*:}
        for v in "${ACTIVE[@]}"; do
            vg_col "$v" || continue
            for p in "${ACTIVE[@]}"; do
                vg_col "$p" && continue
                [ -n "${HIST[$m:$v]:-}" ] && [ -n "${HIST[$m:$p]:-}" ] || continue
                paste -d' ' <(tr ' ' '\n' <<<"${HIST[$m:$v]}" | grep .) \
                    <(tr ' ' '\n' <<<"${HIST[$m:$p]}" | grep .) |
                    awk '$2 > 0 { printf "%.2f\n", $1 / $2 }' >"$W/ratios"
                printf '%-20s %-10s/ %-8s %s  (%s; %s-%s)\n' "$label" "$v" "$p" \
                    "$(xargs <"$W/ratios")" "$(median <"$W/ratios")" \
                    "$(sort -g "$W/ratios" | head -1)" "$(sort -g "$W/ratios" | tail -1)"
            done
        done
    done
}

if [ -n "${PAIRS:-}" ]; then
    # per test, every proxy started once and kept up; then PAIRS turns of SLICE s each, the
    # proxies' order reversed every other turn (A B, B A, ...: a steady drift of the machine's
    # speed weighs on both alike); each turn's ratios come from runs seconds apart
    ROUNDS=$PAIRS
    declare -A PORTS MAINS
    for t in "${ORDERED[@]}"; do
        UP=()
        for name in "${ACTIVE[@]}"; do
            proxy_up "$name" || continue
            PORTS[$name]=$PORT MAINS[$name]=$MAIN_PID
            UP+=("$name")
        done
        if [ "$t" = mem ] || [ "$t" = calls ] || [ "$t" = hscalls ]; then
            for name in "${UP[@]}"; do # counts and memory do not drift: once per proxy
                PORT=${PORTS[$name]} MAIN_PID=${MAINS[$name]}
                "bench_$t" "$name"
            done
            round_done
        else
            for r in $(seq "$PAIRS"); do
                TURN=("${UP[@]}")
                [ $((r % 2)) = 0 ] && mapfile -t TURN < <(printf '%s\n' "${UP[@]}" | tac)
                for name in "${TURN[@]}"; do
                    PORT=${PORTS[$name]} MAIN_PID=${MAINS[$name]}
                    WARMED=$((r > 1)) SECS=$SLICE "bench_$t" "$name"
                done
                round_done
            done
        fi
        for name in "${UP[@]}"; do
            PORT=${PORTS[$name]} MAIN_PID=${MAINS[$name]}
            proxy_down "$name"
        done
    done
    rounds_report
elif [ "${INTERLEAVE:-0}" = 1 ] || [ "$ROUNDS" -gt 1 ]; then
    # each test on every proxy in turn, each proxy freshly started for it: the ratios of a test
    # compare runs minutes apart at most, not a whole proxy's series apart
    for r in $(seq "$ROUNDS"); do
        k=$(((r - 1) % ${#ACTIVE[@]}))
        TURN=("${ACTIVE[@]:k}" "${ACTIVE[@]:0:k}")
        if [ "$ROUNDS" -gt 1 ]; then echo "-- round $r of $ROUNDS: ${TURN[*]}"; fi
        for t in "${ORDERED[@]}"; do
            for name in "${TURN[@]}"; do
                proxy_up "$name" || continue
                "bench_$t" "$name"
                proxy_down "$name"
            done
        done
        if [ "$ROUNDS" -gt 1 ]; then round_done; fi
    done
    if [ "$ROUNDS" -gt 1 ]; then rounds_report; fi
else
    for name in "${ACTIVE[@]}"; do
        proxy_up "$name" || continue
        for t in "${ORDERED[@]}"; do "bench_$t" "$name"; done
        proxy_down "$name"
    done
fi

echo
table_head
row "keep-alive req/s" RPS
row "keep-alive req/proxy-CPU-s" RPS_CPU
row "full handshakes/s" CPS
row "full hs/proxy-CPU-s" CPS_CPU
row "resumed handshakes/s" RCPS
row "resumed hs/proxy-CPU-s" RCPS_CPU
row "bulk MiB/s (1 MiB answers)" BULK
row "bulk MiB/proxy-CPU-s" BULK_CPU
row "h2 req/s" H2
row "h2 req/proxy-CPU-s" H2_CPU
row "idle KiB/conn (lower better)" MEM
[[ " $TESTS " == *" calls "* ]] && row "syscalls/request" SYSC && row "allocations/request" ALLOC
if [[ " $TESTS " == *" hscalls "* ]]; then
    for c in $HC_CALLS $HC_EVENTS; do row "$c/full handshake" "$(hc_var full "$c")"; done
    for c in $HC_CALLS $HC_EVENTS; do row "$c/resumed handshake" "$(hc_var res "$c")"; done
fi
exit 0
