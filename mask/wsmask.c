/*
 * wsmask.c - reflection masking of a credentialed WebSocket by message (SPEC §4).
 *
 * Guarantees:
 * - The server's frames are parsed (RFC 6455 §5.2) and checked: no mask bit, no reserved bit
 *   (vaultgate removed the extension offers, so none was negotiated), known opcodes only,
 *   control frames unfragmented and at most 125 bytes, continuations only inside a message,
 *   lengths in their minimal encoding. A frame that breaks a rule is never passed on, not even
 *   its header.
 * - The payloads of one data message, across all its frames, are one stream for the masker, so
 *   a secret cut across frames is masked. Control frames (close, ping, pong) are masked whole,
 *   each on its own, and may sit between the frames of a message as the server sent them.
 * - Frame headers go out unchanged, each just before the first payload byte it announces: the
 *   client sees exactly the server's framing. What the masker holds back (a tail that could
 *   begin a secret) waits with every header and control frame after it; the final frame of a
 *   message releases everything at once.
 * - After a protocol error nothing more is parsed; wsmask_fail() completes the frames already
 *   begun with '*' (held bytes are never released) and appends a 1002 close frame.
 */
#include "mask/wsmask.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/caps.h"
#include "mask/mask.h"

#define WS_FIN       0x80
#define WS_RSV       0x70
#define WS_OPCODE    0x0f
#define WS_MASKBIT   0x80
#define WS_CTRL_MAX  125
#define WS_HDR_MAX   10 /* server frames carry no masking key */
#define WS_OP_CONT   0x0
#define WS_OP_TEXT   0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE  0x8
#define WS_OP_PING   0x9
#define WS_OP_PONG   0xa
#define WS_ITEMS_MAX VG_CONN_OUT_CAP /* bytes of headers waiting behind held payload */
#define WS_FILL_MAX  VG_CONN_OUT_CAP /* stars that may complete a frame cut short */

enum ws_state {
    WS_S_HEAD = 0, /* reading a frame header */
    WS_S_DATA,     /* payload of a data frame: through the message masker */
    WS_S_CTRL,     /* payload of a control frame: collected, then masked whole */
    WS_S_BROKEN,   /* the server broke the protocol: nothing more is parsed */
};

/* A frame header or a whole control frame waiting until the payload before it is out. */
struct ws_item {
    uint64_t at; /* message-stream offset of the payload byte it precedes */
    uint16_t len;
};

struct wsmask {
    struct mask *data; /* the payload of data messages, one message at a time */
    struct mask *ctrl; /* control-frame payloads, each one whole */
    enum ws_state state;
    unsigned char hdr[WS_HDR_MAX];
    size_t hlen;
    uint64_t left;                         /* payload bytes of the current frame still to come */
    bool fin;                              /* the current data frame ends its message */
    bool in_msg;                           /* a data message has begun and not ended */
    unsigned char cframe[2 + WS_CTRL_MAX]; /* the control frame being read */
    size_t clen;
    uint64_t fed;             /* payload bytes fed to the data masker */
    uint64_t sent;            /* payload bytes appended to the output */
    struct evbuffer *scratch; /* masked payload not yet appended (items go before some) */
    struct evbuffer *items;   /* struct ws_item + bytes, in wire order */
    size_t items_bytes;
};

struct wsmask *wsmask_new(const struct inject_form *forms, size_t nforms)
{
    struct wsmask *w = calloc(1, sizeof(*w));

    if (w == NULL)
        return NULL;
    w->data = mask_new(forms, nforms);
    w->ctrl = mask_new(forms, nforms);
    w->scratch = evbuffer_new();
    w->items = evbuffer_new();
    if (w->data == NULL || w->ctrl == NULL || w->scratch == NULL || w->items == NULL)
        wsmask_free(&w);
    return w;
}

void wsmask_free(struct wsmask **wp)
{
    struct wsmask *w = *wp;

    if (w == NULL)
        return;
    mask_free(&w->data);
    mask_free(&w->ctrl);
    if (w->scratch != NULL)
        evbuffer_free(w->scratch);
    if (w->items != NULL)
        evbuffer_free(w->items);
    memset(w, 0, sizeof(*w));
    free(w);
    *wp = NULL;
}

int wsmask_close_frame(struct evbuffer *out, unsigned code)
{
    unsigned char f[4] = {WS_FIN | WS_OP_CLOSE, 2, (unsigned char)(code >> 8), (unsigned char)code};

    return evbuffer_add(out, f, sizeof(f));
}

int wsmask_in_message(const struct wsmask *w)
{
    return w->in_msg || w->hlen > 0 || w->state != WS_S_HEAD;
}

static int ws_fail_state(struct wsmask *w)
{
    w->state = WS_S_BROKEN;
    return -1;
}

/* Queues bytes to go out right before payload offset `at`. 0 or -1 (too many waiting). */
static int ws_queue(struct wsmask *w, uint64_t at, const unsigned char *p, size_t len)
{
    struct ws_item it = {at, (uint16_t)len};

    if (w->items_bytes + sizeof(it) + len > WS_ITEMS_MAX)
        return -1;
    if (evbuffer_add(w->items, &it, sizeof(it)) < 0 || evbuffer_add(w->items, p, len) < 0)
        return -1;
    w->items_bytes += sizeof(it) + len;
    return 0;
}

/* Appends to out the masked payload and the items in wire order, as far as both are known. */
static int ws_drain(struct wsmask *w, struct evbuffer *out)
{
    for (;;) {
        struct ws_item it;
        size_t n = evbuffer_get_length(w->scratch);
        bool item = w->items_bytes > 0 &&
                    evbuffer_copyout(w->items, &it, sizeof(it)) == (ev_ssize_t)sizeof(it);

        if (item && it.at <= w->sent) {
            evbuffer_drain(w->items, sizeof(it));
            if (evbuffer_remove_buffer(w->items, out, it.len) != (int)it.len)
                return -1;
            w->items_bytes -= sizeof(it) + it.len;
            continue;
        }
        if (item && it.at - w->sent < n)
            n = (size_t)(it.at - w->sent);
        if (n == 0)
            return 0;
        if (evbuffer_remove_buffer(w->scratch, out, n) != (int)n)
            return -1;
        w->sent += n;
    }
}

/*
 * Checks the first two header bytes and returns the header's full length (2, 4 or 10), or 0
 * when the frame breaks the protocol.
 */
static size_t ws_head_check(const struct wsmask *w, const unsigned char *h)
{
    unsigned op = h[0] & WS_OPCODE, len7 = h[1] & 0x7f;
    bool ctrl = (op & 0x8) != 0;

    if ((h[0] & WS_RSV) != 0 || (h[1] & WS_MASKBIT) != 0)
        return 0;
    if (op != WS_OP_CONT && op != WS_OP_TEXT && op != WS_OP_BINARY && op != WS_OP_CLOSE &&
        op != WS_OP_PING && op != WS_OP_PONG)
        return 0;
    if (ctrl)
        return (h[0] & WS_FIN) != 0 && len7 <= WS_CTRL_MAX ? 2 : 0;
    if ((op == WS_OP_CONT) != w->in_msg)
        return 0;
    return len7 == 126 ? 4 : len7 == 127 ? 10 : 2;
}

/* The payload length of a complete header, or UINT64_MAX when it is not minimally encoded. */
static uint64_t ws_head_length(const unsigned char *h, size_t hlen)
{
    uint64_t v = 0;

    if (hlen == 2)
        return h[1] & 0x7f;
    for (size_t i = 2; i < hlen; i++)
        v = (v << 8) | h[i];
    if (hlen == 4)
        return v >= 126 ? v : UINT64_MAX;
    return v > 0xffff && (v >> 63) == 0 ? v : UINT64_MAX;
}

/* A whole header was read: queue it (data) or start collecting the frame (control). */
static int ws_head_done(struct wsmask *w, struct evbuffer *out)
{
    uint64_t len = ws_head_length(w->hdr, w->hlen);

    if (len == UINT64_MAX)
        return ws_fail_state(w);
    w->left = len;
    if ((w->hdr[0] & 0x8) != 0) {
        memcpy(w->cframe, w->hdr, 2);
        w->clen = 0;
        w->state = WS_S_CTRL;
    } else {
        if (ws_queue(w, w->fed, w->hdr, w->hlen) < 0)
            return ws_fail_state(w);
        w->fin = (w->hdr[0] & WS_FIN) != 0;
        w->in_msg = true;
        w->state = WS_S_DATA;
    }
    w->hlen = 0;
    return 0;
}

/* The current data frame is complete; the final one flushes its message. 0 or -1. */
static int ws_data_done(struct wsmask *w, struct evbuffer *out)
{
    w->state = WS_S_HEAD;
    if (!w->fin)
        return 0;
    w->in_msg = false;
    if (mask_finish(w->data, w->scratch) < 0)
        return -1;
    return ws_drain(w, out);
}

/* A whole control frame was read: its payload masked on its own, then queued in place. */
static int ws_ctrl_done(struct wsmask *w, struct evbuffer *out)
{
    struct evbuffer *tmp = evbuffer_new();
    int rc = -1;

    if (tmp == NULL)
        return -1;
    if (mask_feed(w->ctrl, (const char *)w->cframe + 2, w->clen, tmp) == 0 &&
        mask_finish(w->ctrl, tmp) == 0 && evbuffer_get_length(tmp) == w->clen) {
        evbuffer_remove(tmp, w->cframe + 2, w->clen);
        rc = ws_queue(w, w->fed, w->cframe, 2 + w->clen);
    }
    evbuffer_free(tmp);
    memset(w->cframe, 0, sizeof(w->cframe));
    w->state = WS_S_HEAD;
    if (rc < 0)
        return ws_fail_state(w);
    return ws_drain(w, out);
}

/* Consumes header bytes from p; returns how many, or -1 on a protocol error. */
static ssize_t ws_feed_head(struct wsmask *w, const unsigned char *p, size_t len,
                            struct evbuffer *out)
{
    size_t need = w->hlen < 2 ? 2 : ws_head_check(w, w->hdr), take;

    if (need == 0)
        return ws_fail_state(w);
    take = need - w->hlen < len ? need - w->hlen : len;
    memcpy(w->hdr + w->hlen, p, take);
    w->hlen += take;
    if (w->hlen == 2 && need == 2) {
        need = ws_head_check(w, w->hdr);
        if (need == 0)
            return ws_fail_state(w);
        if (need > 2)
            return (ssize_t)take;
    }
    if (w->hlen < need)
        return (ssize_t)take;
    if (ws_head_done(w, out) < 0)
        return -1;
    if (w->left == 0 && w->state == WS_S_DATA && ws_data_done(w, out) < 0)
        return ws_fail_state(w);
    if (w->left == 0 && w->state == WS_S_CTRL && ws_ctrl_done(w, out) < 0)
        return -1;
    return (ssize_t)take;
}

/* Consumes payload bytes from p; returns how many, or -1. */
static ssize_t ws_feed_payload(struct wsmask *w, const unsigned char *p, size_t len,
                               struct evbuffer *out)
{
    size_t take = w->left < len ? (size_t)w->left : len;

    if (w->state == WS_S_CTRL) {
        memcpy(w->cframe + 2 + w->clen, p, take);
        w->clen += take;
        w->left -= take;
        if (w->left == 0 && ws_ctrl_done(w, out) < 0)
            return -1;
        return (ssize_t)take;
    }
    if (mask_feed(w->data, (const char *)p, take, w->scratch) < 0)
        return ws_fail_state(w);
    w->fed += take;
    w->left -= take;
    if (w->left == 0 && ws_data_done(w, out) < 0)
        return ws_fail_state(w);
    return (ssize_t)take;
}

int wsmask_feed(struct wsmask *w, const char *data, size_t len, struct evbuffer *out)
{
    const unsigned char *p = (const unsigned char *)data;

    while (len > 0) {
        ssize_t n;

        if (w->state == WS_S_BROKEN)
            return -1;
        n = w->state == WS_S_HEAD ? ws_feed_head(w, p, len, out) : ws_feed_payload(w, p, len, out);
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return ws_drain(w, out);
}

/* Appends n '*' bytes to the masked payload. 0 or -1. */
static int ws_stars(struct evbuffer *b, uint64_t n)
{
    char stars[256];

    memset(stars, '*', sizeof(stars));
    while (n > 0) {
        size_t k = n < sizeof(stars) ? (size_t)n : sizeof(stars);

        if (evbuffer_add(b, stars, k) < 0)
            return -1;
        n -= k;
    }
    return 0;
}

int wsmask_fail(struct wsmask *w, struct evbuffer *out)
{
    uint64_t held = w->fed - w->sent - evbuffer_get_length(w->scratch);

    /* what the masker holds may begin a secret: it is dropped (and wiped), never released */
    mask_free(&w->data);
    if (w->state == WS_S_DATA && w->left > WS_FILL_MAX) {
        /* a frame cut far from its end: no close frame can follow it */
        w->state = WS_S_BROKEN;
        return -1;
    }
    if (w->state == WS_S_DATA)
        held += w->left; /* the rest of a frame whose header is already out or queued */
    w->fed += w->state == WS_S_DATA ? w->left : 0;
    w->state = WS_S_BROKEN;
    if (ws_stars(w->scratch, held) < 0 || ws_drain(w, out) < 0)
        return -1;
    /* headers of frames that were never begun stay back: nothing of them is sent */
    evbuffer_drain(w->items, evbuffer_get_length(w->items));
    w->items_bytes = 0;
    return wsmask_close_frame(out, WSMASK_CLOSE_PROTOCOL);
}
