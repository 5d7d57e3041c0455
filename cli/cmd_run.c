/*
 * cmd_run.c - `vaultgate run`: take the checked options (cli/run_opts.c), set up every
 * enforcement piece in order, start the workers, then own the signals (SPEC §2, §8).
 *
 * Guarantees: fail closed - the vault (exit 3), the CA, the listeners, the admin API and the
 * audit store (exit 4) all exist before the first worker accepts a connection; a command-line
 * error prints one line naming the option and exits 2; no listener is in the listening state
 * before the last of them succeeded, and the admin API answers nothing (not even /healthz)
 * before every worker's loop accepts on them. The process is not dumpable (also after --user) and
 * writes no core. Signals are taken by the main thread alone (cli/signals.h has the table):
 * SIGTERM, SIGINT, SIGQUIT (and SIGXCPU, SIGPWR) stop accepting, let requests in flight finish
 * for at most VG_STOP_GRACE_SECONDS, flush the audit store and exit 0; SIGUSR1, SIGUSR2 and the
 * other signals that would end the process by default are logged and change nothing; SIGPIPE is
 * ignored. SIGHUP reloads the vault on the main thread, off the workers' path (cli/reload.h): a
 * valid vault is swapped in atomically, an invalid one keeps the old policy; either way
 * /v1/status says what happened until the next reload.
 */
#include "audit/audit.h"
#include "audit/log.h"
#include "ca/ca.h"
#include "ca/certcache.h"
#include "common/caps.h"
#include "common/sechist.h"
#include "common/timefmt.h"
#include "common/timeouts.h"
#include "policy/policy.h"
#include "proxy/admin.h"
#include "proxy/admin_page.h"
#include "cli/cli.h"
#include "proxy/dns.h"
#include "proxy/listen.h"
#include "proxy/worker.h"
#include "proxy/metrics.h"
#include "proxy/modules.h"
#include "proxy/oauth.h"
#include "cli/reload.h"
#include "cli/run_opts.h"
#include "cli/signals.h"
#include "cli/trustfiles.h"
#include "cli/vaultwatch.h"
#include "proxy/upstream.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

/* Everything the admin thread reads (status, ready, metrics extras). */
struct run_state {
    struct worker_shared sh;
    struct run_opts *o;
    char mode_reason[256]; /* copies: the start-up snapshot goes away on reload */
    char run_id[VG_RUN_ID_MAX + 1];
    char ca_sha256[65];
    char started_at[TIMEFMT_BUFSZ];
    char audit_url[RUN_PATH_MAX];
    _Atomic int serving;
    char ca_out[RUN_PATH_MAX];
    char *pem; /* the root certificate, PEM */
    size_t pemlen;
    bool metrics_up;
    struct admin *admin;
    struct worker *workers;
    struct reload_warnings warnings;
    struct vaultwatch *watch; /* --vault-watch */
};

static void add_strings(cJSON *arr, const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(v[i]));
}

/* SPEC §7: no rules, no block entries, an allow default (a default-mode vault has no wildcard
 * or regex blocks; its exact and IP blocks are among its names). */
static bool nothing_to_enforce(const struct policy *p)
{
    const struct policy_name *names;
    size_t n;

    if (policy_rule_count(p) > 0 || policy_mode(p, NULL) != POLICY_MODE_DEFAULT)
        return false;
    names = policy_names(p, &n);
    for (size_t i = 0; i < n; i++) {
        if (names[i].block)
            return false;
    }
    return true;
}

/*
 * SPEC §12: a report-only vault enforces no policy refusal, so enforcement is degraded while it
 * is loaded. N counts from process start (across reloads); a reload to `enforce: true` ends the
 * warning, not the count.
 */
static void report_only_warning(const struct policy *p, cJSON *arr)
{
    struct metrics_totals mt;
    char buf[96];

    if (!policy_report_only(p))
        return;
    metrics_totals(&mt);
    snprintf(buf, sizeof(buf), "report-only: %llu requests would have been refused",
             (unsigned long long)mt.reported);
    cJSON_AddItemToArray(arr, cJSON_CreateString(buf));
}

static void run_status(void *arg, cJSON *obj)
{
    struct run_state *rs = arg;
    struct policy *p = worker_policy_ref(&rs->sh);
    struct audit_status as = {0};
    cJSON *run, *arr, *au;
    const char *const *v;
    size_t n;

    cJSON_AddStringToObject(obj, "version", VAULTGATE_VERSION);
    run = cJSON_AddObjectToObject(obj, "run");
    if (run != NULL) {
        cJSON_AddStringToObject(run, "id", policy_run_id(p));
        cJSON_AddStringToObject(run, "user", policy_run_user(p));
    }
    cJSON_AddStringToObject(obj, "mode", policy_mode_name(rs->sh.mode));
    cJSON_AddStringToObject(obj, "mode_reason", rs->mode_reason);
    cJSON_AddNumberToObject(obj, "rules", (double)policy_rule_count(p));
    cJSON_AddNumberToObject(obj, "host_entries", (double)policy_host_entry_count(p));
    arr = cJSON_AddArrayToObject(obj, "listeners");
    for (size_t i = 0; arr != NULL && i < rs->sh.naddrs; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(rs->sh.addrs[i].label));
    au = cJSON_AddObjectToObject(obj, "audit");
    if (au != NULL) {
        if (rs->sh.audit != NULL)
            audit_status(rs->sh.audit, &as);
        else
            snprintf(as.store, sizeof(as.store), "%s", "(starting)");
        cJSON_AddStringToObject(au, "store", as.store);
        cJSON_AddBoolToObject(au, "healthy", as.healthy || (rs->sh.audit != NULL && !as.enabled));
        cJSON_AddNumberToObject(au, "pending", (double)as.pending);
    }
    arr = cJSON_AddArrayToObject(obj, "warnings");
    if (arr != NULL) {
        v = policy_warnings(p, &n);
        add_strings(arr, v, n);
        if (rs->sh.audit != NULL && as.enabled && !as.healthy)
            cJSON_AddItemToArray(arr, cJSON_CreateString("audit store unhealthy: counts are kept "
                                                         "in memory and retried"));
        reload_warnings_json(&rs->warnings, arr);
        oauth_warnings_json(p, arr);
        report_only_warning(p, arr);
    }
    cJSON_AddStringToObject(
        obj, "enforcement",
        admin_enforcement((size_t)cJSON_GetArraySize(arr), nothing_to_enforce(p)));
    arr = cJSON_AddArrayToObject(obj, "notes");
    if (arr != NULL) {
        v = policy_notes(p, &n);
        add_strings(arr, v, n);
    }
    au = cJSON_AddObjectToObject(obj, "timeouts");
    for (int k = 0; au != NULL && k < VG_T_COUNT; k++)
        cJSON_AddNumberToObject(au, vg_timeout_name(k), vg_timeout(&rs->sh.timeouts, k));
    cJSON_AddStringToObject(obj, "ca_sha256", rs->ca_sha256);
    cJSON_AddStringToObject(obj, "started_at", rs->started_at);
    policy_unref(&p);
}

static int run_ready(void *arg)
{
    struct run_state *rs = arg;
    struct audit_status as = {0};

    if (!atomic_load(&rs->serving) || rs->sh.audit == NULL)
        return 0;
    audit_status(rs->sh.audit, &as);
    return !as.enabled || as.healthy;
}

static void run_metrics_extra(void *arg, void *extra)
{
    struct run_state *rs = arg;
    struct metrics_extra *me = extra;
    struct certcache_stats st;

    certcache_stats(rs->sh.certs, &st);
    me->cert_cache_hits = st.hits;
    me->cert_cache_misses = st.misses;
}

/* ---- start-up steps --------------------------------------------------------------------- */

static void harden(void)
{
    struct rlimit rl = {0, 0};

    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    setrlimit(RLIMIT_CORE, &rl);
    /* two descriptors per proxied connection: take every descriptor the hard limit allows */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The descriptor limit after harden(), for the default connection limit. */
static long nofile_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 1L << 20;
    return (long)rl.rlim_cur;
}

/* Loads the vault, retrying for up to wait seconds. NULL + err. */
static struct policy *load_vault(const char *path, double wait, char *err, size_t errlen)
{
    struct timespec t0, now;
    struct policy *p;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec nap = {0, 200 * 1000 * 1000};

        p = policy_load(path, err, errlen);
        if (p != NULL || wait <= 0)
            return p;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >= wait)
            return NULL;
        nanosleep(&nap, NULL);
    }
}

/*
 * The state directory, created 0711 when missing (SPEC §2): others cannot list it, but a sandbox
 * user that is not root can read ca.pem and the trust files in it by name. What else goes in
 * it is 0600 (the umask cmd_run sets); an existing directory keeps its mode.
 */
static int make_state_dir(const char *dir, const struct passwd *pw, char *err, size_t errlen)
{
    struct stat st;
    bool made = mkdir(dir, 0711) == 0;

    if (!made && errno != EEXIST) {
        snprintf(err, errlen, "state directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "state directory %s: not a directory", dir);
        return -1;
    }
    if (made && chmod(dir, 0711) != 0) { /* mkdir's mode went through the umask */
        snprintf(err, errlen, "state directory %s: chmod: %s", dir, strerror(errno));
        return -1;
    }
    if (pw != NULL && chown(dir, pw->pw_uid, pw->pw_gid) != 0) {
        snprintf(err, errlen, "state directory %s: chown: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* The CA: constrained to the vault's exact names in default routing. */
static struct ca *make_ca(struct policy *p, enum policy_mode mode, char *err, size_t errlen)
{
    const struct policy_name *names;
    struct ca_names cn = {0};
    const char **dns = NULL, **ip = NULL;
    struct ca *ca = NULL;
    size_t n;

    names = policy_names(p, &n);
    cn.constrained = mode == POLICY_MODE_DEFAULT;
    if (cn.constrained) {
        dns = calloc(n + 1, sizeof(*dns));
        ip = calloc(n + 1, sizeof(*ip));
        if (dns == NULL || ip == NULL) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            if (names[i].ip)
                ip[cn.nip++] = names[i].name;
            else
                dns[cn.ndns++] = names[i].name;
        }
        cn.dns = dns;
        cn.ip = ip;
    }
    ca = ca_new(policy_run_id(p), &cn, err, errlen);
out:
    free(dns);
    free(ip);
    return ca;
}

static int drop_privileges(const struct passwd *pw, char *err, size_t errlen)
{
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) {
        snprintf(err, errlen, "--user %s: cannot drop privileges: %s", pw->pw_name,
                 strerror(errno));
        return -1;
    }
    if (setuid(0) == 0 && pw->pw_uid != 0) {
        snprintf(err, errlen, "--user %s: privileges could be regained", pw->pw_name);
        return -1;
    }
    /* a credential change resets the dumpable flag to fs.suid_dumpable: set it again */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        snprintf(err, errlen, "--user %s: cannot stay non-dumpable: %s", pw->pw_name,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* Pre-creates the SQLite file owned by the run user, so the store is theirs after the drop. */
static void own_sqlite(const char *url, const struct passwd *pw)
{
    const char *path = url + 7;
    int fd;

    if (pw == NULL || strncmp(url, "sqlite:", 7) != 0)
        return;
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (fchown(fd, pw->pw_uid, pw->pw_gid) != 0)
            log_eventf(LOG_WARN, "start", "chown", "cannot give the audit store to --user");
        close(fd);
    }
}

/* ---- main ------------------------------------------------------------------------------- */

static void log_start(struct run_state *rs)
{
    char fp[65 + 64];
    size_t k = 0;

    for (size_t i = 0; i < 64 && k + 3 < sizeof(fp); i += 2) {
        fp[k++] = rs->ca_sha256[i];
        fp[k++] = rs->ca_sha256[i + 1];
        fp[k++] = i + 2 < 64 ? ':' : '\0';
    }
    fp[sizeof(fp) - 1] = '\0';
    for (size_t i = 0; i < rs->sh.naddrs; i++) {
        struct log_fields f = LOG_FIELDS_INIT;

        f.listener = rs->sh.addrs[i].label;
        log_event(LOG_INFO, "listen", &f);
    }
    /* the fingerprint in colon form: the redactor masks long runs of token characters */
    log_eventf(LOG_INFO, "start", "serving", "mode=%s workers=%d max_connections=%d ca_sha256=%s",
               policy_mode_name(rs->sh.mode), rs->sh.nworkers, rs->sh.max_conns, fp);
}

/* "SIGUSR1 from pid 42 (uid 0)" for a signal a process sent, "SIGXCPU" for the kernel's. */
static void signal_origin(const struct signalfd_siginfo *si, char *buf, size_t len)
{
    char name[24];

    signals_name((int)si->ssi_signo, name, sizeof(name));
    if (si->ssi_code == SI_USER || si->ssi_code == SI_QUEUE)
        snprintf(buf, len, "%s from pid %ld (uid %lu)", name, (long)si->ssi_pid,
                 (unsigned long)si->ssi_uid);
    else
        snprintf(buf, len, "%s", name);
}

static int64_t monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One signal taken from the signalfd: 1 to stop (rc set), 0 to go on. */
static int take_signal(struct run_state *rs, const struct signalfd_siginfo *si, int *rc)
{
    char origin[96];

    signal_origin(si, origin, sizeof(origin));
    switch (signals_action((int)si->ssi_signo)) {
    case SIGNALS_RELOAD:
        reload_vault(&rs->warnings, rs->o->vault, &rs->sh, rs->workers);
        return 0;
    case SIGNALS_IGNORE:
        log_eventf(LOG_INFO, "signal", "signal_ignored", "%s: ignored", origin);
        return 0;
    case SIGNALS_STOP:
        log_eventf(LOG_INFO, "stop", "signal", "%s: stopping", origin);
        *rc = EXIT_OK;
        return 1;
    }
    return 0;
}

/*
 * The main thread's loop: the signals (through a signalfd, since they are blocked in every
 * thread) and, with --vault-watch, the vault's inotify descriptor, whose changes reload the
 * vault exactly as SIGHUP does once the debounce window closes. Returns the exit code.
 */
static int wait_signals(struct run_state *rs, const sigset_t *set)
{
    int sfd = signalfd(-1, set, SFD_CLOEXEC), rc = EXIT_RUNTIME;

    if (sfd < 0) {
        log_eventf(LOG_ERROR, "stop", "signalfd", "cannot take signals: %s", strerror(errno));
        return EXIT_RUNTIME;
    }
    for (;;) {
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {-1, POLLIN, 0}};
        int timeout = -1;
        struct signalfd_siginfo si;
        ssize_t n;

        if (rs->watch != NULL) {
            pf[1].fd = vaultwatch_fd(rs->watch);
            timeout = vaultwatch_timeout(rs->watch, monotonic_ms());
        }
        if (poll(pf, rs->watch != NULL ? 2 : 1, timeout) < 0 && errno != EINTR)
            break;
        if (pf[0].revents & POLLIN) {
            n = read(sfd, &si, sizeof(si));
            if (n == (ssize_t)sizeof(si) && take_signal(rs, &si, &rc))
                break;
            if (n < 0 && errno != EAGAIN && errno != EINTR)
                break;
        }
        if (rs->watch == NULL)
            continue;
        if ((pf[1].revents & POLLIN) && vaultwatch_read(rs->watch) > 0)
            vaultwatch_changed(rs->watch, monotonic_ms());
        if (vaultwatch_timeout(rs->watch, monotonic_ms()) == 0) {
            log_eventf(LOG_INFO, "reload", "vault_changed", "the vault file changed: reloading");
            reload_vault(&rs->warnings, rs->o->vault, &rs->sh, rs->workers);
            vaultwatch_done(rs->watch, monotonic_ms());
        }
    }
    close(sfd);
    return rc;
}

/* --trust-out: what `vaultgate trust` writes, and trust.env with the lines it prints, before
 * any listener accepts (so before /readyz turns 200). 0 or -1 + err. */
static int write_trust_out(struct run_state *rs, char *err, size_t errlen)
{
    const char *dir = rs->o->trust_out;
    struct trustfiles t = {NULL, NULL, NULL, NULL};
    char bundle[RUN_PATH_MAX], env[RUN_PATH_MAX], e[960];
    int rc = -1;

    if (dir == NULL)
        return 0;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "--trust-out %s: %s", dir, strerror(errno));
        return -1;
    }
    if (snprintf(bundle, sizeof(bundle), "%s/bundle.pem", dir) >= (int)sizeof(bundle) ||
        snprintf(env, sizeof(env), "%s/trust.env", dir) >= (int)sizeof(env)) {
        snprintf(err, errlen, "--trust-out: the directory name is too long");
        return -1;
    }
    if (trustfiles_write(rs->pem, rs->pemlen, rs->o->ca_out, bundle, TRUSTFILES_DEFAULT_ROOTS, &t,
                         e, sizeof(e)) == 0 &&
        trustfiles_write_env(&t, env, e, sizeof(e)) == 0)
        rc = 0;
    else
        snprintf(err, errlen, "--trust-out: %s", e);
    trustfiles_free(&t);
    return rc;
}

/* State directory, CA, --ca-out, certificate cache, metrics, ticket keys. 0 or -1 + err. */
static int run_setup_ca(struct run_state *rs, const struct passwd *pw, char *err, size_t errlen)
{
    struct run_opts *o = rs->o;
    char path[RUN_PATH_MAX];

    if (make_state_dir(o->state_dir, pw, err, errlen) < 0)
        return -1;
    rs->sh.ca = make_ca(rs->sh.policy, rs->sh.mode, err, errlen);
    if (rs->sh.ca == NULL)
        return -1;
    ca_root_sha256(rs->sh.ca, rs->ca_sha256);
    if (o->ca_out == NULL) {
        snprintf(path, sizeof(path), "%s/ca.pem", o->state_dir);
        snprintf(rs->ca_out, sizeof(rs->ca_out), "%s", path);
        o->ca_out = rs->ca_out;
    }
    if (ca_write_root(rs->sh.ca, o->ca_out, err, errlen) < 0)
        return -1;
    if (ca_root_pem(rs->sh.ca, &rs->pem, &rs->pemlen) < 0) {
        snprintf(err, errlen, "CA certificate: cannot encode");
        return -1;
    }
    if (write_trust_out(rs, err, errlen) < 0)
        return -1;
    rs->sh.certs = certcache_new(rs->sh.ca, VG_CERTCACHE_MIN);
    if (rs->sh.certs == NULL || metrics_init(o->threads) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rs->metrics_up = true;
    if (RAND_bytes(rs->sh.ticket_keys, sizeof(rs->sh.ticket_keys)) != 1) {
        snprintf(err, errlen, "no randomness for session ticket keys");
        return -1;
    }
    return 0;
}

/* Binds every listener socket and registers their addresses as never-dialled. 0 or -1. */
static int run_setup_listeners(struct run_state *rs, char *err, size_t errlen)
{
    if (listen_bind_all(rs->sh.addrs, rs->sh.naddrs, rs->sh.nworkers, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < rs->sh.naddrs; i++) {
        if (upstream_add_own_address((const struct sockaddr *)&rs->sh.addrs[i].ss) < 0) {
            snprintf(err, errlen, "listener %s: cannot register own address",
                     rs->sh.addrs[i].label);
            return -1;
        }
    }
    return 0;
}

/*
 * Start-up warnings, then the admin API's socket with the status/ready/metrics callbacks: bound
 * and listening (a taken address fails the start), answering nothing until admin_serve.
 */
static int run_setup_admin(struct run_state *rs, char *err, size_t errlen)
{
    struct run_opts *o = rs->o;
    struct admin_ops ops = {0};

    if (o->audit == NULL)
        snprintf(rs->audit_url, sizeof(rs->audit_url), "sqlite:%s/audit.db", o->state_dir);
    else
        snprintf(rs->audit_url, sizeof(rs->audit_url), "%s", o->audit);
    if (strcmp(rs->audit_url, "off") == 0)
        reload_warn(&rs->warnings, true, "audit is off: refusals are not recorded");
    ops.status = run_status;
    ops.ready = run_ready;
    ops.metrics_extra = run_metrics_extra;
    ops.arg = rs;
    ops.ca_pem = rs->pem;
    ops.ca_pem_len = rs->pemlen;
    ops.audit_url = rs->audit_url;
    ops.run_id = rs->run_id;
    rs->admin = admin_open(o->admin, &ops, err, errlen);
    return rs->admin != NULL ? 0 : -1;
}

/* Everything that needs the privileges, then the drop, then the audit store. 0 or exit code. */
static int run_setup(struct run_state *rs, char *err, size_t errlen)
{
    struct run_opts *o = rs->o;
    struct passwd pwbuf, *pw = NULL;
    char pwstr[1024], aerr[512], verr[768];
    const char *reason = NULL;

    if (o->user != NULL && getpwnam_r(o->user, &pwbuf, pwstr, sizeof(pwstr), &pw) != 0)
        pw = NULL;
    rs->sh.policy = load_vault(o->vault, o->vault_wait, verr, sizeof(verr));
    if (rs->sh.policy == NULL) {
        snprintf(err, errlen, "%s: %s", o->vault, verr); /* which file, then what */
        return EXIT_VAULT;
    }
    rs->sh.mode = policy_mode(rs->sh.policy, &reason);
    snprintf(rs->mode_reason, sizeof(rs->mode_reason), "%s", reason != NULL ? reason : "");
    snprintf(rs->run_id, sizeof(rs->run_id), "%s", policy_run_id(rs->sh.policy));
    reload_check_vault_mode(&rs->warnings, o->vault);
    if (run_setup_ca(rs, pw, err, errlen) < 0 || run_setup_listeners(rs, err, errlen) < 0 ||
        run_setup_admin(rs, err, errlen) < 0)
        return EXIT_ENFORCE;
    own_sqlite(rs->audit_url, pw);
    if (pw != NULL && drop_privileges(pw, err, errlen) < 0)
        return EXIT_ENFORCE;
    rs->sh.audit = audit_open(rs->audit_url, o->audit_source, policy_run_user(rs->sh.policy),
                              policy_run_id(rs->sh.policy), o->threads, aerr, sizeof(aerr));
    if (rs->sh.audit == NULL || audit_start(rs->sh.audit, aerr, sizeof(aerr)) < 0) {
        snprintf(err, errlen, "audit store: %s", aerr);
        return EXIT_ENFORCE;
    }
    /* the token manager: fetches at once for every oauth2 source the vault uses */
    rs->sh.oauth =
        oauth_start(rs->sh.upcfg, rs->sh.audit,
                    vg_timeout(&o->timeouts, VG_T_CONNECT) +
                        vg_timeout(&o->timeouts, VG_T_UPSTREAM_HANDSHAKE) + VG_OAUTH_FETCH_EXTRA,
                    err, errlen);
    if (rs->sh.oauth == NULL || oauth_bind(rs->sh.oauth, rs->sh.policy, err, errlen) < 0)
        return EXIT_RUNTIME;
    /* last step that can fail closed: only now does the kernel accept connections */
    if (listen_listen_all(rs->sh.addrs, rs->sh.naddrs, rs->sh.nworkers, err, errlen) < 0)
        return EXIT_ENFORCE;
    timefmt_iso8601(timefmt_now_ms(), rs->started_at, sizeof(rs->started_at));
    if (modules_register(&rs->sh, err, errlen) < 0 ||
        (rs->workers = worker_start_all(&rs->sh, err, errlen)) == NULL)
        return EXIT_RUNTIME;
    /* every listener accepts now (worker_start_all waited for the loops): only now does the
     * admin API answer, so /healthz never speaks before the listeners do (SPEC §7) */
    atomic_store(&rs->serving, 1);
    return admin_serve(rs->admin, err, errlen) == 0 ? 0 : EXIT_RUNTIME;
}

/* Frees whatever run_setup() built, in reverse order. */
static void run_teardown(struct run_state *rs)
{
    worker_stop_all(&rs->workers, rs->sh.nworkers, VG_STOP_GRACE_SECONDS);
    oauth_stop(rs->sh.oauth); /* before the audit store closes: a fetch records its route */
    admin_stop(&rs->admin);
    audit_close(&rs->sh.audit);
    listen_close_fds(rs->sh.addrs, rs->sh.naddrs, rs->sh.nworkers);
    certcache_free(&rs->sh.certs);
    ca_free(&rs->sh.ca);
    policy_unref(&rs->sh.policy);
    oauth_free(&rs->sh.oauth); /* after the last snapshot: its sources go with it */
    sechist_clear();           /* every value the secrets held, wiped */
    if (rs->metrics_up)
        metrics_shutdown();
    free(rs->pem);
    rs->pem = NULL;
    reload_warnings_free(&rs->warnings);
    vaultwatch_free(&rs->watch);
}

int cmd_run(int argc, char **argv)
{
    static struct run_opts o;
    static struct run_state rs;
    struct upstream_config uc = {0};
    char err[1024];
    sigset_t set;
    int rc;

    if (argc > 1 && cli_is_help(argv[1])) {
        run_opts_usage(stdout);
        return EXIT_OK;
    }
    memset(&o, 0, sizeof(o));
    memset(&rs, 0, sizeof(rs));
    o.log_level = LOG_INFO;
    rc = run_opts_parse(argc, argv, &o, &rs.sh, &uc);
    if (rc != 0)
        return rc;
    log_set_level(o.log_level);
    rs.o = &o;
    pthread_mutex_init(&rs.sh.policy_lock, NULL);
    reload_warnings_init(&rs.warnings);
    rs.sh.nworkers = o.threads;
    rs.sh.upcfg = &uc;

    /* every thread started from here inherits the mask; only the main thread takes signals */
    signals_run_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* files of the run are the run user's alone (the audit store and SQLite's -wal and -shm
     * files take its mode); the public ones say 0644 themselves (ca.pem, ca_write_root) */
    umask(077);
    harden();
    rs.sh.max_conns = o.max_conns > 0
                          ? o.max_conns
                          : listen_default_max_conns(rs.sh.naddrs, rs.sh.nworkers, nofile_limit());
    if (o.max_conns > 0 && (long)o.max_conns * 2 + VG_CONN_FD_RESERVE > nofile_limit())
        log_eventf(LOG_WARN, "start", "max_connections",
                   "--max-connections %d needs more descriptors than RLIMIT_NOFILE (%ld) allows",
                   o.max_conns, nofile_limit());

    rc = run_setup(&rs, err, sizeof(err));
    if (rc == 0 && o.vault_watch) {
        rs.watch = vaultwatch_open(o.vault, err, sizeof(err));
        rc = rs.watch != NULL ? 0 : EXIT_RUNTIME;
    }
    if (rc == 0) {
        log_start(&rs);
        rc = wait_signals(&rs, &set);
        atomic_store(&rs.serving, 0);
    } else {
        fprintf(stderr, "vaultgate run: %s\n", err);
    }
    run_teardown(&rs);
    if (rc == EXIT_OK)
        log_eventf(LOG_INFO, "stop", "stopped", "clean stop");
    return rc;
}
