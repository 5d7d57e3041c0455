# lib.sh - what the benchmark scripts share (sourced, not run): a work directory that is removed
# with every process started into PIDS, a free loopback port, CPU seconds and RSS of processes, a
# test CA with ECDSA P-256 leaves, the nginx upstream that answers over TLS, the proxies under
# comparison (nginx, haproxy, vaultgate) configured alike, idle-connection memory, and the table
# of figures and ratios. Loopback only.

PIDS=()

# bench_workdir PREFIX: makes $W, cds into it, and on exit stops $PIDS and removes $W
# (kept when KEEP is set).
bench_workdir() {
    W=$(mktemp -d "/tmp/$1.XXXXXX")
    trap bench_cleanup EXIT
    cd "$W"
}

bench_cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    if [ -n "${KEEP:-}" ]; then echo "kept $W" >&2; else rm -rf "$W"; fi
}

free_port() {
    python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

# CPU clock ticks (utime+stime) of processes and their threads; divide by $(getconf CLK_TCK).
cpu_of() {
    local total=0 p
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] || continue
        total=$(awk -v t="$total" '{ print t + ($14 + $15) }' "/proc/$p/stat")
    done
    echo "$total"
}

# bench_ca CN: a test CA in ca.pem/ca.key in the current directory.
bench_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
        -out ca.pem -days 2 -subj "/CN=$1" -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}

# bench_leaf NAME SANS: NAME.pem/NAME.key signed by the test CA, e.g. SANS "IP:127.0.0.1".
bench_leaf() {
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$2" \
        >"$1.ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
        -out "$1.csr" -subj "/CN=$1" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
        -days 2 -sha256 -extfile "$1.ext" 2>/dev/null
}

# bench_need CMD PACKAGE: installs the Debian PACKAGE with apt-get when CMD is missing (quietly;
# the caller checks for CMD afterwards).
bench_need() {
    command -v "$1" >/dev/null && return 0
    echo "installing $2 (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null 2>&1; } || true
}

# bench_upstream ADDR BODY [LISTEN_FLAGS [SERVER_CONF]]: nginx on ADDR:443 with up.pem/up.key
# answering 200 BODY, pinned to $LOAD_CPU, its PID added to PIDS. LISTEN_FLAGS go on its listen
# directive (e.g. http2), SERVER_CONF into its server block (e.g. checks that answer 4xx).
bench_upstream() {
    local d="$W/up-$1"
    mkdir -p "$d"
    cat >"$d/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 10000000;
    server {
        listen $1:443 ssl reuseport ${3:-};
        ssl_certificate $W/up.pem;
        ssl_certificate_key $W/up.key;
        ${4:-}
        location / { return 200 "$2\n"; }
    }
}
NGINX
    taskset -c "$LOAD_CPU" nginx -c "$d/nginx.conf" -p "$d" 2>"$d/stderr" &
    PIDS+=($!)
}

# ---- the proxies under comparison. Each start_<name> starts one worker pinned to $PROXY_CPU,
# listening on 127.0.0.1:$PORT with px-chain.pem/px.key (vaultgate mints its own leaf), setting
# "Authorization: Bearer $SECRET" towards $UP_ADDR:443 (verified against ca.pem as
# api.example.test) on keep-alive connections, and sets MAIN_PID. Clients name the proxy
# ${PX_HOST:-127.0.0.1} (SNI). Knobs: NGX_LISTEN (flags of nginx's listen directive),
# NGX_KEEPALIVE (idle upstream connections nginx keeps, default 64), NGX_SUITES (TLS 1.3 suites
# nginx prefers, both ways, e.g. vaultgate's order "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:
# TLS_CHACHA20_POLY1305_SHA256"; default: OpenSSL's order, the client's choice), NGX_ACCESS_LOG
# (default off: nginx logs no request; "combined", nginx's own default, or "json", a line of the
# fields vaultgate's request line carries, each written to px/access.log as nginx does, one
# write(2) per request), NGX_WORKERS and HAP_THREADS (default 1; the proxies are pinned to
# $PROXY_CPU, which may name several CPUs), HAP_BIND and HAP_SERVER (options of haproxy's bind and
# server lines), VG_AUDIT (vaultgate's --audit, default off; "sqlite": the store vg_audit_url
# names), VG_LOG_LEVEL (default info), VG_THREADS (default 1), VG_ADMIN (its admin port, default a
# free one).
start_nginx() {
    mkdir -p px
    cat >px/nginx.conf <<EOF
worker_processes ${NGX_WORKERS:-1};
daemon off;
pid $W/px/nginx.pid;
error_log $W/px/error.log warn;
events { worker_connections 16384; }
http {
    log_format json escape=json '{"time":"\$time_iso8601","level":"info","event":"request",'
        '"conn":\$connection,"client":"\$remote_addr:\$remote_port",'
        '"listener":"https \$server_addr:\$server_port","host":"\$host",'
        '"proto":"\$server_protocol","route":"direct","decision":"inject","rule":0,'
        '"secret":"BENCH_KEY","status":\$status,"bytes_in":\$request_length,'
        '"bytes_out":\$body_bytes_sent,"duration":\$request_time}';
    access_log ${NGX_ACCESS_LOG:+$W/px/access.log }${NGX_ACCESS_LOG:-off};
    keepalive_requests 10000000;
    upstream up { server $UP_ADDR:443; keepalive ${NGX_KEEPALIVE:-64}; }
    server {
        listen 127.0.0.1:$PORT ssl ${NGX_LISTEN:-};
        ssl_certificate $W/px-chain.pem;
        ssl_certificate_key $W/px.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_tickets on;
        ${NGX_SUITES:+ssl_prefer_server_ciphers on; ssl_conf_command Ciphersuites $NGX_SUITES;}
        location / {
            proxy_pass https://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host api.example.test;
            proxy_set_header Authorization "Bearer $SECRET";
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $W/ca.pem;
            proxy_ssl_name api.example.test;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;
            ${NGX_SUITES:+proxy_ssl_conf_command Ciphersuites $NGX_SUITES;}
        }
    }
}
EOF
    taskset -c "$PROXY_CPU" nginx -c "$W/px/nginx.conf" -p "$W/px" 2>"$W/px/stderr" &
    MAIN_PID=$!
}
start_haproxy() {
    cat >haproxy.cfg <<EOF
global
    nbthread ${HAP_THREADS:-1}
    maxconn 9000
    ssl-default-bind-options ssl-min-ver TLSv1.2
defaults
    mode http
    timeout connect 10s
    timeout client 120s
    timeout server 120s
    timeout http-keep-alive 120s
frontend fe
    bind 127.0.0.1:$PORT ssl crt $W/px-haproxy.pem ${HAP_BIND:-}
    default_backend be
backend be
    http-reuse always
    http-request set-header Host api.example.test
    http-request set-header Authorization "Bearer $SECRET"
    server up $UP_ADDR:443 ssl verify required ca-file $W/ca.pem sni str(api.example.test) verifyhost api.example.test ${HAP_SERVER:-}
EOF
    taskset -c "$PROXY_CPU" haproxy -db -f haproxy.cfg >"$W/haproxy.log" 2>&1 &
    MAIN_PID=$!
}
# vaultgate: a bearer rule for the proxy's name (so its reflection masking runs too), that name
# pinned to $UP_ADDR:443 (and the same for a second name PX_HOST2 when set); its log lines go to
# vg$VG_TAG.stderr and its state to var$VG_TAG (VG_TAG, default empty: for a second instance).
# vg_audit_url [TAG]: vaultgate's --audit for VG_AUDIT (default off): "sqlite" is the store in
# its state directory (var$TAG, as start_vaultgate gives it); anything else is passed as it is
vg_audit_url() {
    if [ "${VG_AUDIT:-off}" = sqlite ]; then
        echo "sqlite:$W/var${1:-}/audit.db"
    else
        echo "${VG_AUDIT:-off}"
    fi
}
# vg_log [TAG]: the file of vaultgate's log lines (vg$TAG.stderr, as start_vaultgate gives it)
vg_log() { echo "$W/vg${1:-}.stderr"; }
# vg_log_errors [TAG]: vaultgate's first five error lines, under a heading, if it logged any
vg_log_errors() {
    grep -q '"level":"error"' "$(vg_log "${1:-}")" || return 0
    echo "vaultgate logged errors:"
    grep '"level":"error"' "$(vg_log "${1:-}")" | head -5
}
start_vaultgate() {
    local rule2="" resolve2=()
    if [ -n "${PX_HOST2:-}" ]; then
        rule2=", {\"host_pattern\": \"$PX_HOST2\", \"secret\": \"BENCH_KEY\", \"scheme\": \"bearer\"}"
        resolve2=(--resolve "$PX_HOST2:443:$UP_ADDR")
    fi
    cat >vault.json <<EOF
{"version": 1, "run": {"id": "bench", "user": "bench"},
 "secrets": {"BENCH_KEY": {"value": "$SECRET"}},
 "rules": [{"host_pattern": "${PX_HOST:-127.0.0.1}", "secret": "BENCH_KEY", "scheme": "bearer"}$rule2],
 "host_policy": {"default": "allow", "hosts": {}}}
EOF
    chmod 600 vault.json
    taskset -c "$PROXY_CPU" "$VG" run --vault vault.json --state-dir "$W/var${VG_TAG:-}" \
        --threads "${VG_THREADS:-1}" --listen-https "127.0.0.1:$PORT" --listen-http none \
        --admin "127.0.0.1:${VG_ADMIN:-$(free_port)}" \
        --audit "$(vg_audit_url "${VG_TAG:-}")" --log-level "${VG_LOG_LEVEL:-info}" --upstream-ca ca.pem \
        --resolve "${PX_HOST:-127.0.0.1}:443:$UP_ADDR" "${resolve2[@]}" 2>"$(vg_log "${VG_TAG:-}")" &
    MAIN_PID=$!
}
proxy_pids() { echo "$MAIN_PID $(pgrep -P "$MAIN_PID" | tr '\n' ' ')"; }

rss_of() { # KiB
    local total=0 p
    for p in "$@"; do
        [ -r "/proc/$p/status" ] || continue
        total=$((total + $(awk '/^VmRSS/ { print $2 }' "/proc/$p/status")))
    done
    echo "$total"
}

# idle_hold N [MODE]: holds N idle connections to 127.0.0.1:$PORT (SNI $PX_HOST) opened on
# $LOAD_CPU by $W/idleclient (built from idleclient.c; MODE is its fifth argument), and reads the
# RSS of proxy_pids before and once all are open. Sets IDLE_LINE (the client's "ready N failed
# M"), IDLE_R0 and IDLE_R1 (KiB) and IDLE_KIB (growth per open connection). MEM_HOOK runs while
# the connections are held, with $MAIN_PID set (e.g. a heap dump).
idle_hold() {
    local ok idle_pid
    IDLE_R0=$(rss_of $(proxy_pids))
    exec 3> >(taskset -c "$LOAD_CPU" "$W/idleclient" 127.0.0.1 "$PORT" "${PX_HOST:-127.0.0.1}" "$1" ${2:-} >"$W/idle.out")
    idle_pid=$!
    for _ in $(seq 1200); do
        grep -q ready "$W/idle.out" 2>/dev/null && break
        sleep 0.1
    done
    sleep 1
    IDLE_R1=$(rss_of $(proxy_pids))
    [ -n "${MEM_HOOK:-}" ] && MAIN_PID=$MAIN_PID bash -c "$MEM_HOOK"
    IDLE_LINE=$(cat "$W/idle.out")
    ok=$(awk '/ready/ { print $2 }' "$W/idle.out")
    exec 3>&- # EOF on the client's stdin: it closes its connections
    wait "$idle_pid" 2>/dev/null || true
    IDLE_KIB=$(awk -v a="$IDLE_R0" -v b="$IDLE_R1" -v n="${ok:-0}" \
        'BEGIN { printf "%.1f", (n > 0 ? (b - a) / n : 0) }')
}

# ---- the table: a column per proxy of ACTIVE, then, for each vaultgate column (vaultgate, and
# vgwarn: the same build at --log-level warn), its ratio to each other one ----
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }
vg_col() { [ "$1" = vaultgate ] || [ "$1" = vgwarn ]; }
table_head() {
    local head p v
    head=$(printf '%-30s' "")
    for p in "${ACTIVE[@]}"; do head+=$(printf ' %11s' "$p"); done
    for v in "${ACTIVE[@]}"; do
        vg_col "$v" || continue
        for p in "${ACTIVE[@]}"; do
            vg_col "$p" || head+=$(printf ' %11s' "${v:0:6}/${p:0:4}")
        done
    done
    echo "$head"
}
row() { # label array
    local -n arr=$2
    local line p v
    line=$(printf '%-30s' "$1")
    for p in "${ACTIVE[@]}"; do line+=$(printf ' %11s' "${arr[$p]:--}"); done
    for v in "${ACTIVE[@]}"; do
        vg_col "$v" || continue
        for p in "${ACTIVE[@]}"; do
            vg_col "$p" || line+=$(printf ' %11s' "$(ratio "${arr[$v]:-0}" "${arr[$p]:-0}")")
        done
    done
    echo "$line"
}
