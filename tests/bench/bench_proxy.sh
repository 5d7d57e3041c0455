#!/usr/bin/env bash
# bench_proxy.sh - vaultgate vs nginx as a TLS-terminating, header-setting proxy (not a test).
#
# Both proxies: one worker pinned to CPU $PROXY_CPU, TLS 1.3 with an ECDSA P-256 leaf, the same
# Authorization header set on every request, pooled keep-alive upstream connections, upstream TLS
# verified against a test CA. The upstream is nginx serving a 3-byte response over TLS, pinned
# to $LOAD_CPU together with the load generators. Loopback only.
#
# Measures
#   keep-alive requests/s   wrk -c$CONNS on persistent connections
#   full handshakes/s       tests/bench/hsclient.c: new connection, SNI, no session offered
#                           (resumed handshakes are counted and must be 0)
# and, for each, the proxy's own CPU seconds (utime+stime from /proc), so rates are also given
# per proxy CPU-second: on a small machine the load generator may saturate its core first.
#
# Usage: tests/bench/bench_proxy.sh [BUILD_DIR]   (env: SECS=10 CONNS=64 HS_THREADS=4
#        PROXY_CPU=0 LOAD_CPU=1 VG_LOG_LEVEL=warn PERF=/tmp/vg.perf to profile vaultgate)
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
VG=$BUILD/proxy/vaultgate
SECS=${SECS:-10}
CONNS=${CONNS:-64}
HS_THREADS=${HS_THREADS:-4}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
VG_LOG_LEVEL=${VG_LOG_LEVEL:-warn}
UP_ADDR=127.0.0.93

[ -x "$VG" ] || { echo "no vaultgate at $VG" >&2; exit 1; }
for t in nginx wrk openssl taskset cc python3; do
    command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }
done

W=$(mktemp -d /tmp/vgbench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$W"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# ---- certificates: test CA, upstream leaf, nginx-proxy leaf (all ECDSA P-256) ----
cd "$W"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
    -days 2 -subj /CN=bench-ca -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
leaf() { # name sans
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$2" >"$1.ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
        -out "$1.csr" -subj "/CN=$1" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
        -days 2 -sha256 -extfile "$1.ext" 2>/dev/null
}
leaf up "DNS:api.example.test,IP:127.0.0.1"
leaf px "IP:127.0.0.1"
cat px.pem ca.pem >px-chain.pem # leaf + issuer, like vaultgate's leaf + intermediate

# ---- upstream: nginx, static 3-byte answer over TLS ----
mkdir -p up px
cat >up/nginx.conf <<EOF
worker_processes 1;
daemon off;
pid $W/up/nginx.pid;
error_log $W/up/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 10000000;
    server {
        listen $UP_ADDR:443 ssl reuseport;
        ssl_certificate $W/up.pem;
        ssl_certificate_key $W/up.key;
        location / { return 200 "ok\n"; }
    }
}
EOF
taskset -c "$LOAD_CPU" nginx -c "$W/up/nginx.conf" -p "$W/up" 2>"$W/up/stderr" &
PIDS+=($!)

# ---- nginx as the proxy under test ----
NGX_PORT=$(free_port)
cat >px/nginx.conf <<EOF
worker_processes 1;
daemon off;
pid $W/px/nginx.pid;
error_log $W/px/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 10000000;
    upstream up { server $UP_ADDR:443; keepalive 64; }
    server {
        listen 127.0.0.1:$NGX_PORT ssl;
        ssl_certificate $W/px-chain.pem;
        ssl_certificate_key $W/px.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_tickets on;
        location / {
            proxy_pass https://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host api.example.test;
            proxy_set_header Authorization "Bearer sk-bench-FAKE-secret";
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $W/ca.pem;
            proxy_ssl_name api.example.test;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;
        }
    }
}
EOF
taskset -c "$PROXY_CPU" nginx -c "$W/px/nginx.conf" -p "$W/px" 2>"$W/px/stderr" &
NGX_MASTER=$!
PIDS+=($NGX_MASTER)

# ---- vaultgate as the proxy under test ----
VG_PORT=$(free_port)
ADMIN_PORT=$(free_port)
cat >vault.json <<EOF
{"version": 1, "run": {"id": "bench", "user": "bench"},
 "secrets": {"BENCH_KEY": {"value": "sk-bench-FAKE-secret"}},
 "rules": [{"host_pattern": "127.0.0.1", "secret": "BENCH_KEY", "scheme": "bearer"}],
 "host_policy": {"default": "allow", "hosts": {}}}
EOF
taskset -c "$PROXY_CPU" "$VG" run --vault vault.json --state-dir "$W/var" --threads 1 \
    --listen-https "127.0.0.1:$VG_PORT" --listen-http none --admin "127.0.0.1:$ADMIN_PORT" \
    --audit off --log-level "$VG_LOG_LEVEL" --upstream-ca ca.pem \
    --resolve "127.0.0.1:443:$UP_ADDR" 2>"$W/vg.stderr" &
VG_PID=$!
PIDS+=($VG_PID)

# curl sends no SNI for an IP literal; openssl s_client does (as wrk and hsclient do)
get() { # port
    printf 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' |
        timeout 5 openssl s_client -quiet -connect "127.0.0.1:$1" -servername 127.0.0.1 2>/dev/null
}
for i in $(seq 100); do
    if get "$VG_PORT" | grep -q ok && get "$NGX_PORT" | grep -q ok; then
        break
    fi
    sleep 0.1
done
get "$VG_PORT" | grep -q ok || { echo "vaultgate not serving"; cat "$W/vg.stderr"; exit 1; }
get "$NGX_PORT" | grep -q ok || { echo "nginx proxy not serving"; cat "$W/px/error.log"; exit 1; }

cc -O2 -o "$W/hsclient" "$SRC/tests/bench/hsclient.c" -lssl -lcrypto -lpthread

# CPU seconds (utime+stime) of a process and its threads; for nginx the worker children too.
cpu_of() {
    local total=0 p
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] || continue
        total=$(awk -v t="$total" '{ print t + ($14 + $15) }' "/proc/$p/stat")
    done
    echo "$total"
}
proxy_pids() { # name
    if [ "$1" = vaultgate ]; then echo "$VG_PID"; else echo "$NGX_MASTER $(pgrep -P "$NGX_MASTER" | tr '\n' ' ')"; fi
}
TICK=$(getconf CLK_TCK)

declare -A RPS CPS RPS_CPU CPS_CPU
for name in nginx vaultgate; do
    port=$NGX_PORT
    [ "$name" = vaultgate ] && port=$VG_PORT
    pids=$(proxy_pids $name)
    # warm-up (pool, caches)
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d2s "https://127.0.0.1:$port/" >/dev/null
    c0=$(cpu_of $pids)
    if [ -n "${PERF:-}" ] && [ "$name" = vaultgate ]; then # PERF=file: profile vaultgate
        perf record -q -g -p "$VG_PID" -o "$PERF" -- sleep "$SECS" 2>/dev/null &
    fi
    out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${SECS}s" \
        -H "Authorization: Bearer placeholder" "https://127.0.0.1:$port/")
    c1=$(cpu_of $pids)
    RPS[$name]=$(echo "$out" | awk '/Requests\/sec/ { printf "%.0f", $2 }')
    errs=$(echo "$out" | awk '/Non-2xx|Socket errors/ { print }')
    cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
    RPS_CPU[$name]=$(awk -v r="${RPS[$name]}" -v s="$SECS" -v c="$cpu" \
        'BEGIN { printf "%.0f", (c > 0 ? r * s / c : 0) }')
    echo "$name keep-alive: ${RPS[$name]} req/s, proxy CPU ${cpu}s of ${SECS}s ${errs:+($errs)}"

    c0=$(cpu_of $pids)
    if [ -n "${PERF:-}" ] && [ "$name" = vaultgate ]; then
        perf record -q -g -p "$VG_PID" -o "$PERF.hs" -- sleep "$SECS" 2>/dev/null &
    fi
    hs=$(taskset -c "$LOAD_CPU" "$W/hsclient" 127.0.0.1 "$port" 127.0.0.1 "$SECS" "$HS_THREADS")
    c1=$(cpu_of $pids)
    CPS[$name]=$(echo "$hs" | awk '{ printf "%.0f", $10 }')
    n=$(echo "$hs" | awk '{ print $2 }')
    cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
    CPS_CPU[$name]=$(awk -v n="$n" -v c="$cpu" 'BEGIN { printf "%.0f", (c > 0 ? n / c : 0) }')
    echo "$name full handshakes: $hs; proxy CPU ${cpu}s"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
echo
printf '%-28s %12s %12s %8s\n' "" nginx vaultgate ratio
printf '%-28s %12s %12s %8s\n' "keep-alive req/s" "${RPS[nginx]}" "${RPS[vaultgate]}" \
    "$(ratio "${RPS[vaultgate]}" "${RPS[nginx]}")"
printf '%-28s %12s %12s %8s\n' "keep-alive req/proxy-CPU-s" "${RPS_CPU[nginx]}" \
    "${RPS_CPU[vaultgate]}" "$(ratio "${RPS_CPU[vaultgate]}" "${RPS_CPU[nginx]}")"
printf '%-28s %12s %12s %8s\n' "full handshakes/s" "${CPS[nginx]}" "${CPS[vaultgate]}" \
    "$(ratio "${CPS[vaultgate]}" "${CPS[nginx]}")"
printf '%-28s %12s %12s %8s\n' "handshakes/proxy-CPU-s" "${CPS_CPU[nginx]}" \
    "${CPS_CPU[vaultgate]}" "$(ratio "${CPS_CPU[vaultgate]}" "${CPS_CPU[nginx]}")"
grep -q '"level":"error"' "$W/vg.stderr" && { echo "vaultgate logged errors:"; grep '"level":"error"' "$W/vg.stderr" | head -5; }
exit 0
