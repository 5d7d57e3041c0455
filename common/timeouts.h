/*
 * timeouts.h - the timeouts of SPEC §4 by name, their defaults, and `--timeout NAME=SECONDS`.
 *
 * A struct vg_timeouts is filled once before the workers start (worker_shared.timeouts) and
 * only read afterwards. An entry left 0 means the default, so a zeroed struct is the defaults.
 */
#ifndef VG_TIMEOUTS_H
#define VG_TIMEOUTS_H

#include <stddef.h>

enum vg_timeout {
    VG_T_HANDSHAKE,          /* client TLS handshake, 10 s */
    VG_T_HEAD,               /* a request head (HTTP/2: a header block) arriving, 30 s */
    VG_T_IDLE,               /* a keep-alive connection with no request (no stream), 75 s */
    VG_T_CONNECT,            /* upstream TCP connect (with DNS), 10 s */
    VG_T_UPSTREAM_HANDSHAKE, /* upstream TLS handshake, 10 s */
    VG_T_RESPONSE_HEAD,      /* the upstream's response head, 600 s */
    VG_T_BODY_IDLE,          /* a body (or a stream) with no bytes either way, 300 s */
    VG_T_COUNT
};

#define VG_TIMEOUT_MAX 86400 /* seconds, for any of them */

struct vg_timeouts {
    int s[VG_T_COUNT]; /* seconds; 0 = the default */
};

/* Seconds for k: the override, else the default. */
int vg_timeout(const struct vg_timeouts *t, enum vg_timeout k);

/* The option's name of k ("upstream-handshake"). */
const char *vg_timeout_name(enum vg_timeout k);

/* Applies one "NAME=SECONDS" (SECONDS a whole number, 1..VG_TIMEOUT_MAX). 0, or -1 with a
 * one-line reason in err (the names accepted, or what is wrong with the number). */
int vg_timeout_set(struct vg_timeouts *t, const char *arg, char *err, size_t errlen);

#endif
