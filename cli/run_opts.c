/*
 * run_opts.c - the options of `vaultgate run`: the option table and its setters, the usage text,
 * the defaults (the state directory, the listeners, the thread count) and the checks that need
 * the whole set (SPEC §2).
 *
 * Guarantees: a command-line error prints one line naming the option and returns EXIT_USAGE;
 * every listener address is parsed and none overlaps the admin API's before run_opts_parse
 * returns 0, so cmd_run.c sets up nothing for an option set that cannot run.
 */
#include "cli/run_opts.h"

#include "common/caps.h"
#include "proxy/admin.h"
#include "proxy/listen.h"

#include <errno.h>
#include <pwd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void run_opts_usage(FILE *out)
{
    fprintf(out, "usage: vaultgate run --vault FILE [options]\n\n"
                 "Runs the gateway in the foreground. SIGTERM/SIGINT/SIGQUIT stop it (audit "
                 "flushed), SIGHUP reloads the\nvault, SIGUSR1/SIGUSR2 are logged and ignored.\n\n"
                 "  --listen-https ADDR    TLS listener, host:port or [v6]:port (127.0.0.1:8443); "
                 "repeatable\n"
                 "  --listen-http ADDR     plain HTTP listener (127.0.0.1:8080), `none` disables; "
                 "repeatable\n"
                 "  --listen-proxy ADDR    explicit proxy listener (none); repeatable\n"
                 "  --listen-dns ADDR      DNS listener, UDP and TCP, answering every query itself "
                 "(none);\n"
                 "                         repeatable\n"
                 "  --dns-answer IP        the A (or AAAA) record every name gets (A: the address "
                 "the query\n"
                 "                         arrived on; AAAA: none); one IPv4 and one IPv6 at most\n"
                 "  --admin ADDR           admin API (127.0.0.1:9090), or unix:/path\n"
                 "  --admin-allow-remote   allow a non-loopback --admin address\n"
                 "  --ca-out FILE          where the CA certificate goes (<state-dir>/ca.pem)\n"
                 "  --trust-out DIR        write what `vaultgate trust` writes there, and "
                 "trust.env\n"
                 "  --state-dir DIR        state directory, created 0711 ($STATE_DIRECTORY, "
                 "else ./var)\n"
                 "  --audit URL            sqlite:PATH, postgresql://..., or off "
                 "(sqlite:<state-dir>/audit.db)\n"
                 "  --audit-source NAME    proxy or local-egress (proxy)\n"
                 "  --resolve HOST:PORT:ADDR  pin a name to an address; repeatable\n"
                 "  --dns-server ADDR      resolver IP or IP:PORT; repeatable\n"
                 "  --upstream-ca FILE     trust anchors for upstream verification (system store)\n"
                 "  --upstream-proxy URL   HTTP CONNECT proxy for upstream connections\n"
                 "  --allow-private CIDR   destinations exempt from the private-address rule; "
                 "repeatable\n"
                 "  --threads N            worker threads (number of CPUs)\n"
                 "  --user NAME            drop to this user after binding\n"
                 "  --vault-wait SECONDS   retry an unreadable vault this long (0)\n"
                 "  --vault-watch          reload the vault when its file changes (inotify)\n"
                 "  --max-connections N    concurrent client connections; past it 503 "
                 "(from RLIMIT_NOFILE)\n"
                 "  --log-level LEVEL      error, warn, info, debug (info)\n"
                 "  --timeout NAME=SECONDS override one timeout: handshake (10), head (30), "
                 "idle (75),\n"
                 "                         connect (10), upstream-handshake (10), response-head "
                 "(600),\n"
                 "                         body-idle (300); repeatable\n");
}

/* ---- options ---------------------------------------------------------------------------- */

/* `none` disables the plain-HTTP listener (with an address too, a usage error later). */
static int set_listen_http(void *arg, const char *v)
{
    struct run_opts *o = arg;

    if (strcmp(v, "none") == 0) {
        o->http_none = true;
        return 0;
    }
    return cli_list_add(RUN_CMD, "--listen-http", &o->http, v);
}

/* `none` is the default: no explicit proxy listener. */
static int set_listen_proxy(void *arg, const char *v)
{
    struct run_opts *o = arg;

    return strcmp(v, "none") == 0 ? 0 : cli_list_add(RUN_CMD, "--listen-proxy", &o->proxy, v);
}

/* One IPv4 and one IPv6 address at most. */
static int set_dns_answer(void *arg, const char *v)
{
    struct run_opts *o = arg;
    char err[256];

    if (dns_answers_add(&o->dns_answers, v, err, sizeof(err)) < 0)
        return cli_usage_error(RUN_CMD, "--dns-answer: %s", err);
    return 0;
}

/* NAME=SECONDS, one of SPEC §4's timeouts. */
static int set_timeout(void *arg, const char *v)
{
    struct run_opts *o = arg;
    char err[256];

    if (vg_timeout_set(&o->timeouts, v, err, sizeof(err)) < 0)
        return cli_usage_error(RUN_CMD, "--timeout: %s", err);
    return 0;
}

#define RUN_OPT(field) offsetof(struct run_opts, field)

/* In the order of audit_source and log_level. */
static const char *const audit_sources[] = {"proxy", "local-egress", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};

static const struct cli_opt run_table[] = {
    {"--vault", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(vault)},
    {"--listen-https", CLI_LIST, .off = RUN_OPT(https)},
    {"--listen-http", CLI_SET, .set = set_listen_http},
    {"--listen-proxy", CLI_SET, .set = set_listen_proxy},
    {"--listen-dns", CLI_LIST, .off = RUN_OPT(listen_dns)},
    {"--dns-answer", CLI_SET, .set = set_dns_answer},
    {"--admin", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(admin)},
    {"--admin-allow-remote", CLI_FLAG, .off = RUN_OPT(admin_allow_remote)},
    {"--ca-out", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(ca_out)},
    {"--trust-out", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(trust_out)},
    {"--vault-watch", CLI_FLAG, .off = RUN_OPT(vault_watch)},
    {"--state-dir", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(state_dir)},
    {"--audit", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(audit)},
    {"--audit-source", CLI_ENUM, .flags = CLI_ONCE, .off = RUN_OPT(audit_source),
     .choices = audit_sources},
    {"--resolve", CLI_LIST, .off = RUN_OPT(resolve)},
    {"--dns-server", CLI_LIST, .off = RUN_OPT(dns)},
    {"--allow-private", CLI_LIST, .off = RUN_OPT(allow_private)},
    {"--upstream-ca", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(upstream_ca)},
    {"--upstream-proxy", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(upstream_proxy)},
    {"--user", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = RUN_OPT(user)},
    {"--threads", CLI_INT, .flags = CLI_ONCE, .off = RUN_OPT(threads), .lo = 1,
     .hi = VG_WORKERS_MAX},
    {"--vault-wait", CLI_SECONDS, .flags = CLI_ONCE, .off = RUN_OPT(vault_wait), .lo = 0,
     .hi = 86400},
    {"--max-connections", CLI_INT, .flags = CLI_ONCE, .off = RUN_OPT(max_conns), .lo = 1,
     .hi = VG_CONN_MAX_LIMIT},
    {"--log-level", CLI_ENUM, .flags = CLI_ONCE, .off = RUN_OPT(log_level), .choices = log_levels},
    {"--timeout", CLI_SET, .set = set_timeout},
    {0},
};

static int parse_args(int argc, char **argv, struct run_opts *o)
{
    static const struct cli_spec spec = {RUN_CMD, run_table, NULL, NULL, NULL};
    int rc;

    if (cli_parse(&spec, argc, argv, o, &rc) < 0)
        return rc;
    if (o->vault == NULL)
        return cli_usage_error(RUN_CMD, "--vault is required");
    return 0;
}

/* 1 when the working directory is the root directory (where ./var is the system's /var). */
static int cwd_is_root(void)
{
    struct stat cwd, root;

    return stat(".", &cwd) == 0 && stat("/", &root) == 0 && cwd.st_dev == root.st_dev &&
           cwd.st_ino == root.st_ino;
}

/*
 * --state-dir's default (SPEC §2): $STATE_DIRECTORY when systemd sets it (the first directory
 * of a colon-separated list), else ./var - but never the system's /var: started in / without
 * either, it is a usage error. 0 or EXIT_USAGE.
 */
static int default_state_dir(struct run_opts *o)
{
    const char *env = getenv("STATE_DIRECTORY");
    size_t n;

    if (env != NULL && env[0] != '\0' && env[0] != ':') {
        n = strcspn(env, ":");
        if (n >= sizeof(o->state_dir_env))
            return cli_usage_error(RUN_CMD, "--state-dir: $STATE_DIRECTORY is too long");
        memcpy(o->state_dir_env, env, n);
        o->state_dir_env[n] = '\0';
        o->state_dir = o->state_dir_env;
        return 0;
    }
    if (cwd_is_root())
        return cli_usage_error(RUN_CMD, "--state-dir: started in / without --state-dir or "
                                        "$STATE_DIRECTORY; the default ./var would be the "
                                        "system's /var: give --state-dir DIR");
    o->state_dir = "./var";
    return 0;
}

/* Checks that need the whole option set; fills the defaults. 0 or EXIT_USAGE. */
/* The options that stand alone: defaults filled in, then each checked. 0 or an exit code. */
static int check_basic_opts(struct run_opts *o)
{
    char err[512];

    if (o->state_dir == NULL && default_state_dir(o) != 0)
        return EXIT_USAGE;
    if (o->admin == NULL)
        o->admin = "127.0.0.1:9090";
    if (admin_addr_check(o->admin, o->admin_allow_remote, err, sizeof(err)) < 0)
        return cli_usage_error(RUN_CMD, "--admin: %s", err);
    if (o->audit != NULL && strcmp(o->audit, "off") != 0 && strncmp(o->audit, "sqlite:", 7) &&
        strncmp(o->audit, "postgresql://", 13) && strncmp(o->audit, "postgres://", 11))
        return cli_usage_error(RUN_CMD, "--audit: expected sqlite:PATH, postgresql://... or off");
    if (o->audit != NULL && strcmp(o->audit, "sqlite:") == 0)
        return cli_usage_error(RUN_CMD, "--audit: sqlite: needs a path");
    if (o->http_none && o->http.n > 0)
        return cli_usage_error(RUN_CMD, "--listen-http: `none` together with addresses");
    if (o->https.n == 0)
        o->https.v[o->https.n++] = "127.0.0.1:8443";
    if (!o->http_none && o->http.n == 0)
        o->http.v[o->http.n++] = "127.0.0.1:8080";
    if (o->upstream_ca != NULL && access(o->upstream_ca, R_OK) != 0)
        return cli_usage_error(RUN_CMD, "--upstream-ca: cannot read '%s': %s", o->upstream_ca,
                               strerror(errno));
    if (o->user != NULL && getpwnam(o->user) == NULL)
        return cli_usage_error(RUN_CMD, "--user: no such user '%s'", o->user);
    if (o->threads == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);

        o->threads = nc < 1 ? 1 : (nc > VG_WORKERS_MAX ? VG_WORKERS_MAX : (int)nc);
    }
    return 0;
}

/* The addresses of one listener kind into sh->addrs from *n on. 0 or an exit code. */
static int parse_listen_list(const struct cli_list *l, enum listen_kind kind, const char *opt,
                             struct worker_shared *sh, size_t *n)
{
    char err[512];

    for (size_t i = 0; i < l->n; i++) {
        if (listen_parse_addr(l->v[i], kind, &sh->addrs[(*n)++], err, sizeof(err)))
            return cli_usage_error(RUN_CMD, "%s: %s", opt, err);
    }
    return 0;
}

/* Every listener kind: TLS (SNI), plain HTTP (Host), explicit proxy (CONNECT), DNS; none on the
 * admin address. 0 or an exit code. */
static int check_listen_opts(struct run_opts *o, struct worker_shared *sh)
{
    size_t n = 0;
    int rc;

    if ((o->dns_answers.have_v4 || o->dns_answers.have_v6) && o->listen_dns.n == 0)
        return cli_usage_error(RUN_CMD, "--dns-answer: needs --listen-dns");
    sh->dns = o->dns_answers;
    sh->addrs = calloc(o->https.n + o->http.n + o->proxy.n + o->listen_dns.n, sizeof(sh->addrs[0]));
    if (sh->addrs == NULL)
        return cli_usage_error(RUN_CMD, "out of memory");
    if ((rc = parse_listen_list(&o->https, LISTEN_HTTPS, "--listen-https", sh, &n)) != 0 ||
        (rc = parse_listen_list(&o->http, LISTEN_HTTP, "--listen-http", sh, &n)) != 0 ||
        (rc = parse_listen_list(&o->proxy, LISTEN_PROXY, "--listen-proxy", sh, &n)) != 0 ||
        (rc = parse_listen_list(&o->listen_dns, LISTEN_DNS, "--listen-dns", sh, &n)) != 0)
        return rc;
    if (n > VG_LISTENERS_MAX)
        return cli_usage_error(RUN_CMD, "more than %d listeners", VG_LISTENERS_MAX);
    /* both would bind (neither listens yet), and the listener's listen() would then blame
     * "another socket": say which two */
    for (size_t i = 0; i < n; i++) {
        if (admin_addr_overlaps(o->admin, &sh->addrs[i].ss))
            return cli_usage_error(RUN_CMD, "--admin %s: the address of listener %s", o->admin,
                                   sh->addrs[i].label);
    }
    sh->naddrs = n;
    return 0;
}

/* Checks that need the whole option set; fills the defaults and the upstream side. 0 or
 * EXIT_USAGE. */
static int check_opts(struct run_opts *o, struct worker_shared *sh, struct upstream_config *uc)
{
    char err[512];
    int rc = check_basic_opts(o);

    if (rc != 0)
        return rc;
    uc->pins = o->resolve.v;
    uc->npins = o->resolve.n;
    uc->dns_servers = o->dns.v;
    uc->ndns = o->dns.n;
    uc->allow_private = o->allow_private.v;
    uc->nallow = o->allow_private.n;
    uc->ca_file = o->upstream_ca;
    uc->upstream_proxy = o->upstream_proxy;
    sh->timeouts = o->timeouts;
    uc->connect_timeout = vg_timeout(&o->timeouts, VG_T_CONNECT);
    uc->tls_timeout = vg_timeout(&o->timeouts, VG_T_UPSTREAM_HANDSHAKE);
    uc->pool_idle_timeout = 60;
    uc->pool_max_per_key = 1024; /* >= the concurrency one host sees (10 h2 connections of 100
                                    streams), or the pool churns */
    if (upstream_config_check(uc, err, sizeof(err)) < 0)
        return cli_usage_error(RUN_CMD, "%s", err);
    return check_listen_opts(o, sh);
}

int run_opts_parse(int argc, char **argv, struct run_opts *o, struct worker_shared *sh,
                   struct upstream_config *uc)
{
    int rc = parse_args(argc, argv, o);

    return rc != 0 ? rc : check_opts(o, sh, uc);
}
