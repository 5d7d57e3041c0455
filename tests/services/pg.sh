#!/bin/sh
# pg.sh - a throwaway PostgreSQL cluster for the tests.
#
#   pg.sh start DIR PORT   initialise (once) and start a cluster in DIR listening only on
#                          127.0.0.1:PORT and a unix socket in DIR, trust auth, database
#                          vaultgate_test; prints postgresql://postgres@127.0.0.1:PORT/vaultgate_test
#   pg.sh stop DIR         stop it (fast shutdown); a no-op when it is not running
#
# Idempotent: start on a running cluster only prints the URI. Exits 77 when no PostgreSQL
# server binaries are installed (the integration runner's "skip"). As root the server runs as
# the `postgres` OS user (runuser); DIR's parents must be searchable by that user (parents inside
# the temp directory are made so).
set -eu

die() { echo "pg.sh: $*" >&2; exit 1; }

find_bindir() {
    if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/pg_ctl" ]; then echo "$PG_BINDIR"; return; fi
    # The newest Debian version directory that has a server.
    for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k5 -V -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then echo "$d"; return; fi
    done
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"; return
    fi
}

BINDIR=$(find_bindir)
[ -n "$BINDIR" ] || { echo "pg.sh: PostgreSQL server binaries not found" >&2; exit 77; }

# Runs a command as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then die "usage: pg.sh start DIR PORT | pg.sh stop DIR"; fi
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac
data=$dir/data

# As root: the server runs as `postgres`, which must be able to reach DIR. A parent inside the
# temp directory (e.g. a 0700 mktemp dir) gets search permission for others (o+x: no listing);
# anywhere else pg.sh refuses rather than loosen permissions it does not own.
grant_traverse() {
    tmp=${TMPDIR:-/tmp}
    tmp=${tmp%/}
    path=
    for part in $(dirname "$1" | tr / ' '); do
        path=$path/$part
        as_owner test -x "$path" && continue
        case "$path" in
        "$tmp"/*) chmod o+x "$path" ;;
        *) rmdir "$1" 2>/dev/null || true
           die "$path is not searchable by the postgres user; choose a DIR it can reach" ;;
        esac
    done
}

running() { [ -f "$data/PG_VERSION" ] && as_owner "$BINDIR/pg_ctl" -D "$data" status >/dev/null 2>&1; }

case "$cmd" in
start)
    port=${3:-}
    case "$port" in ''|*[!0-9]*) die "start needs a numeric PORT" ;; esac
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || die "no 'postgres' OS user to run the server as"
        grant_traverse "$dir"
        chown postgres: "$dir"
        as_owner test -w "$dir" || die "$dir is not reachable by the postgres user (check its parents' modes)"
    fi
    if [ ! -f "$data/PG_VERSION" ]; then
        as_owner "$BINDIR/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-sync \
            >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    fi
    if running; then
        # postmaster.pid line 4 is the port the running server listens on.
        cur=$(sed -n 4p "$data/postmaster.pid" 2>/dev/null || true)
        [ "$cur" = "$port" ] || die "the cluster in $dir is running on port $cur, not $port"
    else
        # fsync=off: a throwaway cluster; a fast shutdown still writes everything out.
        as_owner "$BINDIR/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$dir' -c fsync=off" \
            start >/dev/null || { tail -20 "$dir/server.log" >&2; die "server did not start"; }
    fi
    psql="$BINDIR/psql"
    [ -x "$psql" ] || psql=psql
    if [ "$(as_owner "$psql" -h "$dir" -p "$port" -U postgres -d postgres -tAc \
            "SELECT 1 FROM pg_database WHERE datname = 'vaultgate_test'")" != 1 ]; then
        as_owner "$psql" -h "$dir" -p "$port" -U postgres -d postgres -qc \
            "CREATE DATABASE vaultgate_test" >/dev/null
    fi
    echo "postgresql://postgres@127.0.0.1:$port/vaultgate_test"
    ;;
stop)
    if running; then
        as_owner "$BINDIR/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
    fi
    ;;
*)
    die "unknown command '$cmd' (start or stop)"
    ;;
esac
