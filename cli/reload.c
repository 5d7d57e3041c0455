/*
 * reload.c - SIGHUP in `vaultgate run`: the vault re-read on the main thread, the checks that
 * say a relaunch is needed, the snapshot swap, and the status warnings about all that.
 *
 * Guarantees: the policy in use is replaced only by a vault that loaded whole; the workers pick
 * up the new snapshot between requests (proxy/worker.h), so no request sees two policies. The
 * run keeps the routing mode and the CA it started with: a vault that needs another mode, or a
 * name outside a constrained CA, is reported ("relaunch required"), never half-applied. A warning
 * names a host or a vault error (redacted by the policy loader), never a secret.
 */
#include "cli/reload.h"
#include "audit/log.h"
#include "ca/ca.h"
#include "common/sechist.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "proxy/metrics.h"
#include "proxy/oauth.h"
#include "proxy/worker.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void reload_warnings_init(struct reload_warnings *w)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->lock, NULL);
}

static void free_all(char **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(v[i]);
    *n = 0;
}

void reload_warnings_free(struct reload_warnings *w)
{
    pthread_mutex_lock(&w->lock);
    free_all(w->lasting, &w->nlasting);
    free_all(w->last, &w->nlast);
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_destroy(&w->lock);
}

void reload_warn(struct reload_warnings *w, bool lasting, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    char **arr = lasting ? w->lasting : w->last;
    size_t *n = lasting ? &w->nlasting : &w->nlast;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&w->lock);
    if (*n < RELOAD_MAX_WARNINGS) {
        arr[*n] = strdup(buf);
        if (arr[*n] != NULL)
            (*n)++;
    }
    pthread_mutex_unlock(&w->lock);
}

void reload_warnings_json(struct reload_warnings *w, cJSON *arr)
{
    pthread_mutex_lock(&w->lock);
    for (size_t i = 0; i < w->nlasting; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(w->lasting[i]));
    for (size_t i = 0; i < w->nlast; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(w->last[i]));
    pthread_mutex_unlock(&w->lock);
}

void reload_check_vault_mode(struct reload_warnings *w, const char *path)
{
    struct stat st;

    if (stat(path, &st) != 0 || (st.st_mode & (S_IRGRP | S_IROTH)) == 0)
        return;
    reload_warn(w, false, "the vault file is readable by group or others (mode %04o): make it 0600",
                (unsigned)(st.st_mode & 07777));
    log_eventf(LOG_WARN, "vault_mode", "vault_readable",
               "the vault file is readable by group or others (mode %04o)",
               (unsigned)(st.st_mode & 07777));
}

/* "relaunch required" warnings for what the running gateway cannot take from p; true when any
 * was raised. */
static bool check_relaunch(struct reload_warnings *w, const struct policy *p,
                           const struct worker_shared *sh)
{
    const struct policy_name *names;
    const char *reason = NULL;
    bool relaunch = false;
    size_t n;

    if (policy_mode(p, &reason) != sh->mode) {
        reload_warn(w, false, "relaunch required: the vault needs %s routing (%s)",
                    policy_mode_name(policy_mode(p, NULL)), reason != NULL ? reason : "");
        relaunch = true;
    }
    if (!ca_constrained(sh->ca))
        return relaunch;
    names = policy_names(p, &n);
    for (size_t i = 0; i < n; i++) {
        if (!ca_permits(sh->ca, names[i].name)) {
            reload_warn(w, false, "relaunch required: %s is outside the CA's name constraints",
                        names[i].name);
            return true; /* the first one names the problem */
        }
    }
    return relaunch;
}

static void retire_value(const char *name, const char *value, size_t len, void *arg)
{
    int *failed = arg;

    if (sechist_retire(name, value, len, 0) < 0)
        *failed = 1;
}

/*
 * Every static value p no longer holds under its name joins the secret's history before p is
 * published, so a request under p still has its responses masked for the value it replaced
 * (SPEC §4). 0, or -1 when out of memory (p must not be published).
 */
static int retire_replaced(struct worker_shared *sh, const struct policy *p)
{
    struct policy *old = worker_policy_ref(sh);
    int failed = 0;

    if (old != NULL)
        inject_replaced_values(old, p, retire_value, &failed);
    policy_unref(&old);
    return failed ? -1 : 0;
}

enum metrics_reload reload_vault(struct reload_warnings *w, const char *path,
                                 struct worker_shared *sh, struct worker *workers)
{
    enum metrics_reload result = METRICS_R_INVALID;
    char err[512];
    struct policy *p = policy_load(path, err, sizeof(err));

    pthread_mutex_lock(&w->lock);
    free_all(w->last, &w->nlast);
    pthread_mutex_unlock(&w->lock);
    reload_check_vault_mode(w, path);
    if (p == NULL) {
        reload_warn(w, false, "vault reload failed, the previous policy stays: %s", err);
        log_eventf(LOG_WARN, "reload", "vault_invalid", "%s", err);
        goto out;
    }
    if (sh->oauth != NULL && oauth_bind(sh->oauth, p, err, sizeof(err)) < 0) {
        reload_warn(w, false, "vault reload failed, the previous policy stays: %s", err);
        log_eventf(LOG_WARN, "reload", "oauth_bind", "%s", err);
        policy_unref(&p);
        goto out;
    }
    if (retire_replaced(sh, p) < 0) {
        reload_warn(w, false, "vault reload failed, the previous policy stays: out of memory");
        log_eventf(LOG_WARN, "reload", "out_of_memory", "the replaced values could not be kept");
        policy_unref(&p);
        goto out;
    }
    result = check_relaunch(w, p, sh) ? METRICS_R_RELAUNCH : METRICS_R_OK;
    worker_policy_swap(sh, p);
    worker_refresh_all(workers, sh->nworkers);
    /* p is sh's now; only this thread swaps, so it stays valid for the line */
    log_eventf(LOG_INFO, "reload", "vault_loaded", "rules=%zu host_entries=%zu",
               policy_rule_count(p), policy_host_entry_count(p));
out:
    metrics_reload(result);
    return result;
}
