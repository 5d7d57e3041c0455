#!/usr/bin/env bash
# bench_instr.sh - user-space instructions per unit of work of vaultgate and nginx: per keep-alive
# request (ka), per full (hs) and resumed (rs) handshake, per MiB of 1 MiB answers (bulk), counted
# by valgrind's callgrind while tests/bench/bench_proxy.sh drives the proxy (a benchmark, not a
# test). docs/benchmarks.md says how to read it.
#
# Counts, not rates: an instruction count does not move with the machine's speed, so two builds,
# or vaultgate and nginx, compare at any time, and a change of 1 % shows. It leaves out the kernel
# (two thirds of a keep-alive request) and cache and branch effects, so it complements the rates
# of bench_proxy.sh; it does not replace them.
#
# Each proxy runs each test twice under callgrind, SHORT and LONG seconds; the difference of the
# two runs' instruction totals over the difference of their units removes start-up, the
# connections' handshakes of the keep-alive and bulk tests, and shutdown. Under callgrind a proxy
# runs about 50 times slower, so the units are few (thousands of requests, hundreds of
# handshakes) but each is counted exactly. vaultgate runs as in bench_proxy.sh (masking, the
# SQLite audit store, --log-level info); nginx as its proxy there, with master_process off (one
# process, whose counts callgrind writes when it exits). The proxy's nginx is told from the
# upstream's by its configuration path (lib.sh's "$W/px/").
#
# Usage: tests/bench/bench_instr.sh [BUILD_DIR]
#   env: TESTS="ka rs hs" PROXIES="nginx vaultgate" SHORT=10 LONG=30 VG=path/to/vaultgate
#        CG_KEEP=dir (the callgrind files of every run kept there, for callgrind_annotate: the
#        difference of a function's count between the LONG and SHORT runs over the units is its
#        cost per unit)
# valgrind, nginx (nginx-light) and wrk are installed with apt-get when missing.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
VG=${VG:-$BUILD/cli/vaultgate}
TESTS=${TESTS:-ka rs hs}
PROXIES=${PROXIES:-nginx vaultgate}
SHORT=${SHORT:-10}
LONG=${LONG:-30}
. "$SRC/tests/bench/lib.sh"
bench_need valgrind valgrind
bench_need nginx nginx-light

T=$(mktemp -d /tmp/vginstr.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/out"
# vaultgate under callgrind; the proxy's nginx under callgrind, the upstream's as it is
cat >"$T/vaultgate" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$T/out/callgrind.%p "$VG" "\$@"
EOF
cat >"$T/bin/nginx" <<EOF
#!/bin/sh
case "\$*" in
*/px/*) exec valgrind --tool=callgrind --callgrind-out-file=$T/out/callgrind.%p \
    "$(command -v nginx)" -g "master_process off;" "\$@" ;;
*) exec "$(command -v nginx)" "\$@" ;;
esac
EOF
chmod +x "$T/vaultgate" "$T/bin/nginx"

# units TEST SECS OUTPUT: the units of work bench_proxy.sh reports for one proxy's run
units() {
    local r
    case $1 in
    ka)
        r=$(sed -nE 's/.* keep-alive: ([0-9]+) req\/s.*/\1/p' <<<"$3" | head -1)
        echo $((${r:-0} * $2))
        ;;
    bulk)
        r=$(sed -nE 's/.* bulk: ([0-9]+) MiB\/s.*/\1/p' <<<"$3" | head -1)
        echo $((${r:-0} * $2))
        ;;
    *) sed -nE 's/.* handshakes: handshakes ([0-9]+).*/\1/p' <<<"$3" | head -1 ;;
    esac
}

declare -A PER
for t in $TESTS; do
    for p in $PROXIES; do
        u=() i=()
        for secs in $SHORT $LONG; do
            rm -f "$T"/out/*
            out=$(PATH="$T/bin:$PATH" VG="$T/vaultgate" TESTS=$t SECS=$secs PROXIES=$p \
                "$SRC/tests/bench/bench_proxy.sh" "$BUILD" 2>&1) || true
            sleep 1
            n=0
            for f in "$T"/out/callgrind.*; do
                [ -e "$f" ] || continue
                n=$((n + $(awk '/^totals:/ { print $2 }' "$f")))
            done
            u+=("$(units "$t" "$secs" "$out")")
            i+=("$n")
            if [ -n "${CG_KEEP:-}" ]; then
                rm -rf "$CG_KEEP/$p.$t.$secs"
                mkdir -p "$CG_KEEP/$p.$t.$secs"
                cp "$T"/out/callgrind.* "$CG_KEEP/$p.$t.$secs/" 2>/dev/null || true
            fi
            echo "$p $t ${secs}s: ${u[-1]} units, ${i[-1]} instructions"
        done
        if [ "${u[1]:-0}" -gt "${u[0]:-0}" ] && [ "${i[1]}" -gt 0 ] && [ "${i[0]}" -gt 0 ]; then
            PER[$p.$t]=$(((i[1] - i[0]) / (u[1] - u[0])))
        else
            PER[$p.$t]=-
        fi
    done
done

echo
printf '%-34s' "instructions per unit (user space)"
for p in $PROXIES; do printf '%12s' "$p"; done
echo
for t in $TESTS; do
    case $t in
    ka) name="keep-alive request" ;;
    hs) name="full handshake" ;;
    rs) name="resumed handshake" ;;
    bulk) name="MiB of 1 MiB answers" ;;
    *) name=$t ;;
    esac
    printf '%-34s' "$name"
    for p in $PROXIES; do printf '%12s' "${PER[$p.$t]}"; done
    echo
done
