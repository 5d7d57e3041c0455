/*
 * reload.h - SIGHUP in `vaultgate run`: re-read the vault and swap the new policy in, and the
 * warnings /v1/status shows about it (SPEC §8).
 */
#ifndef VG_RELOAD_H
#define VG_RELOAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "proxy/metrics.h"
#include "proxy/worker.h"

#define RELOAD_MAX_WARNINGS 64 /* of each kind; more are dropped */

/*
 * The run's own warnings for /v1/status: lasting ones (from start-up: audit off) and those of
 * the last reload, which the next reload replaces (the vault file's mode is checked again each
 * time). Written on the main thread, read on the admin thread: under the lock.
 */
struct reload_warnings {
    pthread_mutex_t lock;
    char *lasting[RELOAD_MAX_WARNINGS];
    size_t nlasting;
    char *last[RELOAD_MAX_WARNINGS];
    size_t nlast;
};

void reload_warnings_init(struct reload_warnings *w);

/* Frees every warning; the struct can be initialised again. */
void reload_warnings_free(struct reload_warnings *w);

/* Adds one warning: lasting, or until the next reload. */
void reload_warn(struct reload_warnings *w, bool lasting, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends a string per warning to the JSON array arr, the lasting ones first. */
void reload_warnings_json(struct reload_warnings *w, cJSON *arr);

/* A vault holds secrets: warns (until the next reload, and in the log) when group or others may
 * read the file at path. */
void reload_check_vault_mode(struct reload_warnings *w, const char *path);

/*
 * Re-reads the vault at path, on the main thread (never a worker). A valid vault is swapped into
 * sh atomically (worker_policy_swap) and every worker is told (worker_refresh_all); requests in
 * flight keep the snapshot they started with. An invalid one keeps the old policy. Either way
 * the reload warnings say what happened until the next reload: the vault's error, or "relaunch
 * required" when the new vault needs another routing mode than the run was started in or names
 * a host outside the CA's name constraints (swapped in all the same: such a host is refused at
 * the handshake). Logs reload/vault_loaded or reload/vault_invalid. Returns what the reload
 * came to, and counts it in vaultgate_vault_reloads_total: METRICS_R_OK, METRICS_R_INVALID (the
 * old policy stays) or METRICS_R_RELAUNCH (swapped in, "relaunch required" stands).
 */
enum metrics_reload reload_vault(struct reload_warnings *w, const char *path,
                                 struct worker_shared *sh, struct worker *workers);

#endif
