# lib.sh - what the benchmark scripts share (sourced, not run): a work directory that is removed
# with every process started into PIDS, a free loopback port, CPU seconds of processes, a test CA
# with ECDSA P-256 leaves, and the nginx upstream that answers over TLS. Loopback only.

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

# bench_upstream ADDR BODY: nginx on ADDR:443 with up.pem/up.key answering 200 BODY, pinned to
# $LOAD_CPU, its PID added to PIDS.
bench_upstream() {
    mkdir -p up
    cat >up/nginx.conf <<NGINX
worker_processes 1;
daemon off;
pid $W/up/nginx.pid;
error_log $W/up/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 10000000;
    server {
        listen $1:443 ssl reuseport;
        ssl_certificate $W/up.pem;
        ssl_certificate_key $W/up.key;
        location / { return 200 "$2\n"; }
    }
}
NGINX
    taskset -c "$LOAD_CPU" nginx -c "$W/up/nginx.conf" -p "$W/up" 2>"$W/up/stderr" &
    PIDS+=($!)
}
