/*
 * grpcmask.c - masking gRPC messages one at a time (see grpcmask.h).
 *
 * Guarantees: output length equals input length; prefixes are passed on as received; the
 * payload of one message is one stream for the masker, finished at the message's end, so a
 * message that ends is delivered at once and a secret inside one is masked however the DATA
 * was cut; a compressed message (flag 1) is refused before any byte of it goes out.
 */
#include "mask/grpcmask.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/caps.h"
#include "mask/mask.h"

struct grpcmask {
    struct mask *m;
    unsigned char prefix[5];
    size_t plen;   /* prefix bytes collected */
    uint32_t left; /* payload bytes of the current message still to come */
    bool in_msg;   /* inside a message's payload */
    bool failed;
};

struct grpcmask *grpcmask_new(const struct inject_form *forms, size_t nforms)
{
    struct grpcmask *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    g->m = mask_new(forms, nforms);
    if (g->m == NULL)
        grpcmask_free(&g);
    return g;
}

void grpcmask_free(struct grpcmask **gp)
{
    if (*gp == NULL)
        return;
    mask_free(&(*gp)->m);
    free(*gp);
    *gp = NULL;
}

/* A whole prefix: checked and passed on; an empty message ends at once. 0 or -1. */
static int grpc_prefix_done(struct grpcmask *g, struct evbuffer *out)
{
    uint32_t len = ((uint32_t)g->prefix[1] << 24) | ((uint32_t)g->prefix[2] << 16) |
                   ((uint32_t)g->prefix[3] << 8) | g->prefix[4];

    g->plen = 0;
    if (g->prefix[0] != 0 || len > VG_GRPC_MESSAGE_MAX) {
        g->failed = true;
        return -1;
    }
    if (evbuffer_add(out, g->prefix, 5) < 0)
        return -1;
    g->left = len;
    g->in_msg = len > 0;
    return 0;
}

int grpcmask_feed(struct grpcmask *g, const char *data, size_t len, struct evbuffer *out)
{
    while (len > 0) {
        size_t take;

        if (g->failed)
            return -1;
        if (!g->in_msg) {
            take = 5 - g->plen < len ? 5 - g->plen : len;
            memcpy(g->prefix + g->plen, data, take);
            g->plen += take;
            data += take;
            len -= take;
            if (g->plen == 5 && grpc_prefix_done(g, out) < 0)
                return -1;
            continue;
        }
        take = g->left < len ? g->left : len;
        if (mask_feed(g->m, data, take, out) < 0)
            return -1;
        g->left -= (uint32_t)take;
        data += take;
        len -= take;
        if (g->left == 0) {
            g->in_msg = false;
            if (mask_finish(g->m, out) < 0) /* the message ended: all of it goes */
                return -1;
        }
    }
    return 0;
}

int grpcmask_finish(struct grpcmask *g, struct evbuffer *out)
{
    if (g->plen > 0 && evbuffer_add(out, g->prefix, g->plen) < 0)
        return -1;
    g->plen = 0;
    g->in_msg = false;
    return mask_finish(g->m, out);
}
