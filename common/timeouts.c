/*
 * timeouts.c - named timeouts with defaults (see timeouts.h).
 */
#include "common/timeouts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int def;
} table[VG_T_COUNT] = {
    [VG_T_HANDSHAKE] = {"handshake", 10},
    [VG_T_HEAD] = {"head", 30},
    [VG_T_IDLE] = {"idle", 75},
    [VG_T_CONNECT] = {"connect", 10},
    [VG_T_UPSTREAM_HANDSHAKE] = {"upstream-handshake", 10},
    [VG_T_RESPONSE_HEAD] = {"response-head", 600},
    [VG_T_BODY_IDLE] = {"body-idle", 300},
};

int vg_timeout(const struct vg_timeouts *t, enum vg_timeout k)
{
    return t != NULL && t->s[k] > 0 ? t->s[k] : table[k].def;
}

const char *vg_timeout_name(enum vg_timeout k)
{
    return table[k].name;
}

int vg_timeout_set(struct vg_timeouts *t, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    char *end;
    long v;

    for (int k = 0; eq != NULL && k < VG_T_COUNT; k++) {
        if ((size_t)(eq - arg) != strlen(table[k].name) ||
            strncmp(arg, table[k].name, (size_t)(eq - arg)) != 0)
            continue;
        if (eq[1] < '0' || eq[1] > '9') {
            snprintf(err, errlen, "%s: expected whole seconds, 1 to %d", table[k].name,
                     VG_TIMEOUT_MAX);
            return -1;
        }
        v = strtol(eq + 1, &end, 10);
        if (*end != '\0' || v < 1 || v > VG_TIMEOUT_MAX) {
            snprintf(err, errlen, "%s: expected whole seconds, 1 to %d", table[k].name,
                     VG_TIMEOUT_MAX);
            return -1;
        }
        t->s[k] = (int)v;
        return 0;
    }
    snprintf(err, errlen,
             "expected NAME=SECONDS with NAME one of handshake, head, idle, connect, "
             "upstream-handshake, response-head, body-idle");
    return -1;
}
