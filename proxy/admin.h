/*
 * admin.h - the admin API (SPEC §7) on its own thread and event loop, so nothing it does (a
 * store query, rendering) ever stalls a worker.
 */
#ifndef VG_ADMIN_H
#define VG_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>

/* What the admin API reads; every callback runs on the admin thread. */
struct admin_ops {
    /* Adds the /v1/status members to obj. */
    void (*status)(void *arg, cJSON *obj);
    /* 1 when every listener is up and the audit store is reachable. */
    int (*ready)(void *arg);
    /* Fills extra values for /metrics (cert cache counters). May be NULL. */
    void (*metrics_extra)(void *arg, void *extra /* struct metrics_extra * */);
    void *arg;
    const char *ca_pem; /* root certificate, PEM; copied by admin_open */
    size_t ca_pem_len;
    const char *audit_url; /* for /v1/blocked-hosts and /v1/egress-routes; "off" = empty list */
    const char *run_id;
};

struct admin;

/*
 * Usage check for --admin: "host:port", "[v6]:port" or "unix:/path"; a non-loopback address is
 * refused unless allow_remote. 0, or -1 with a one-line reason in err (the caller exits 2).
 */
int admin_addr_check(const char *addr, bool allow_remote, char *err, size_t errlen);

/*
 * Whether the TCP admin address addr (already checked) would take the same port as the listener
 * address ss: the same IP, or a wildcard on either side, same family. A unix socket never does.
 */
bool admin_addr_overlaps(const char *addr, const struct sockaddr_storage *ss);

/*
 * Binds addr and listens, answering nothing yet: connections wait in the backlog until
 * admin_serve. NULL + err when it cannot bind (the caller exits 4).
 */
struct admin *admin_open(const char *addr, const struct admin_ops *ops, char *err, size_t errlen);

/*
 * Starts the admin thread: from now on the API answers (SPEC §7: only once every listener
 * accepts connections, so the caller calls this after the workers run). 0, or -1 + err.
 */
int admin_serve(struct admin *ad, char *err, size_t errlen);

/* Stops the thread, closes the socket (and unlinks a unix socket), frees; NULLs *ap. */
void admin_stop(struct admin **ap);

/*
 * The bound address: "127.0.0.1:9090", "[::1]:9090" or "unix:/path" (with the real port when
 * addr asked for port 0). Valid until admin_stop.
 */
const char *admin_address(const struct admin *ad);

#endif
