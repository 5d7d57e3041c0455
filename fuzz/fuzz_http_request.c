/*
 * fuzz_http_request.c - the request parser and the serialisers, as the proxy chains them.
 *
 * Arbitrary bytes go through a request parser. Every message is forwarded the way the proxy
 * forwards it: hop-by-hop fields stripped, a Host added when HTTP/1.0 had none, a new head
 * written and the body re-framed (Content-Length or clean chunked). Invariants, abort() when
 * one breaks:
 *   1. the bytes emitted for a complete message parse, with a fresh parser, as exactly one
 *      well-formed request (no error, nothing left over) whose method, target, fields (less the
 *      framing field the writer adds), framing and body equal the first parse's;
 *   2. the bytes emitted for a message cut short (error or end of input) never parse as a
 *      complete request: no complete request may reach an upstream;
 *   3. feeding the same input in three pieces, pausing in every callback, gives the same
 *      events and the same outcome as feeding it in one piece.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "common/caps.h"
#include "http/http1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- invariant 3: a digest of the events ---- */

struct digest {
    uint64_t h;
    bool pause;
    bool paused;
};

static void mix(struct digest *d, const void *s, size_t n)
{
    const unsigned char *p = s;

    for (size_t i = 0; i < n; i++)
        d->h = (d->h ^ p[i]) * 0x100000001b3ULL;
}

static int dg_head(void *arg, struct http1_msg *m)
{
    struct digest *d = arg;
    const struct http_head *h = &m->head;

    mix(d, "H", 1);
    mix(d, h->method, strlen(h->method));
    mix(d, h->target, h->target_len);
    mix(d, &m->body, sizeof(m->body));
    mix(d, &m->content_length, sizeof(m->content_length));
    mix(d, &m->keep_alive, sizeof(m->keep_alive));
    mix(d, &m->upgrade, sizeof(m->upgrade));
    for (size_t i = 0; i < h->nfields; i++) {
        mix(d, h->fields[i].name, h->fields[i].name_len + 1);
        mix(d, h->fields[i].value, h->fields[i].value_len + 1);
    }
    d->paused = d->pause;
    return d->pause ? 1 : 0;
}

static int dg_body(void *arg, const char *p, size_t n)
{
    struct digest *d = arg;

    mix(d, p, n);
    d->paused = d->pause;
    return d->pause ? 1 : 0;
}

static int dg_done(void *arg)
{
    struct digest *d = arg;

    mix(d, "D", 1);
    d->paused = d->pause;
    return d->pause ? 1 : 0;
}

static const struct http1_callbacks dg_cb = {dg_head, dg_body, dg_done, NULL};

/* Feeds data in the given pieces; returns the final digest with the outcome mixed in. */
static uint64_t digest_run(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts,
                           bool pause)
{
    struct digest d = {.h = 0xcbf29ce484222325ULL, .pause = pause};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &dg_cb, &d);
    size_t at = 0;
    int outcome = 0;

    if (p == NULL)
        abort();
    for (size_t c = 0; c <= ncuts && outcome == 0; c++) {
        size_t end = c < ncuts ? cuts[c] : size;

        while (at <= end) {
            ssize_t k;

            d.paused = false;
            k = http1_feed(p, (const char *)data + at, end - at);
            if (k < 0) {
                outcome = http1_error(p, NULL);
                break;
            }
            at += (size_t)k;
            if (!d.paused)
                break;
        }
        if (outcome == 0 && at < end) {
            outcome = 1; /* stopped: the rest is never parsed */
            break;
        }
    }
    mix(&d, &outcome, sizeof(outcome));
    if (outcome < 400) /* after an error the count of bytes taken means nothing */
        mix(&d, &at, sizeof(at));
    http1_parser_free(&p);
    return d.h;
}

/* ---- invariants 1 and 2: re-parse what would be forwarded ---- */

struct reparse {
    const struct http1_msg *want;
    struct evbuffer *want_body;
    size_t body_at;
    int heads, dones;
};

static bool same_head(const struct http1_msg *a, const struct http1_msg *b)
{
    const struct http_head *x = &a->head, *y = &b->head;
    size_t j = 0;

    if (strcmp(x->method, y->method) != 0 || x->target_len != y->target_len ||
        memcmp(x->target, y->target, x->target_len) != 0 || y->version_minor != 1)
        return false;
    if (a->body != b->body ||
        (a->body == HTTP1_BODY_LENGTH && a->content_length != b->content_length))
        return false;
    for (size_t i = 0; i < y->nfields; i++) {
        const struct http_field *f = &y->fields[i];

        if ((f->name_len == 14 && strncasecmp(f->name, "content-length", 14) == 0) ||
            (f->name_len == 17 && strncasecmp(f->name, "transfer-encoding", 17) == 0))
            continue;
        if (j >= x->nfields || f->name_len != x->fields[j].name_len ||
            f->value_len != x->fields[j].value_len ||
            memcmp(f->name, x->fields[j].name, f->name_len) != 0 ||
            memcmp(f->value, x->fields[j].value, f->value_len) != 0)
            return false;
        j++;
    }
    return j == x->nfields;
}

static int rp_head(void *arg, struct http1_msg *m)
{
    struct reparse *r = arg;

    if (r->heads++ > 0 || (r->want != NULL && !same_head(r->want, m)))
        abort();
    return 0;
}

static int rp_body(void *arg, const char *p, size_t n)
{
    struct reparse *r = arg;

    if (r->want_body != NULL) {
        size_t have = evbuffer_get_length(r->want_body);

        if (r->body_at + n > have)
            abort();
        if (memcmp(evbuffer_pullup(r->want_body, -1) + r->body_at, p, n) != 0)
            abort();
    }
    r->body_at += n;
    return 0;
}

static int rp_done(void *arg)
{
    struct reparse *r = arg;

    r->dones++;
    return 0;
}

static const struct http1_callbacks rp_cb = {rp_head, rp_body, rp_done, NULL};

/* Invariant 1: out holds exactly one request equal to want, with body want_body. */
static void check_complete(struct evbuffer *out, const struct http1_msg *want,
                           struct evbuffer *want_body)
{
    struct reparse r = {.want = want, .want_body = want_body};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &rp_cb, &r);
    size_t n = evbuffer_get_length(out);
    ssize_t k;

    if (p == NULL)
        abort();
    k = http1_feed(p, (const char *)evbuffer_pullup(out, -1), n);
    if (k != (ssize_t)n || r.heads != 1 || r.dones != 1 ||
        r.body_at != evbuffer_get_length(want_body))
        abort();
    http1_parser_free(&p);
}

/* Invariant 2: out, a message cut short, does not complete a request. */
static void check_partial(struct evbuffer *out)
{
    struct reparse r = {0};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &rp_cb, &r);

    if (p == NULL)
        abort();
    (void)http1_feed(p, (const char *)evbuffer_pullup(out, -1), evbuffer_get_length(out));
    if (r.dones != 0)
        abort();
    http1_parser_free(&p);
}

struct forward {
    const struct http1_msg *msg; /* the message being forwarded, or NULL */
    struct evbuffer *out;        /* what the upstream would receive */
    struct evbuffer *body;       /* the de-framed body, for the comparison */
};

static int fw_head(void *arg, struct http1_msg *m)
{
    struct forward *f = arg;

    f->msg = NULL;
    if (strcmp(m->head.method, "CONNECT") == 0)
        return 0; /* the proxy opens a tunnel, it forwards no request */
    http1_strip_hop_by_hop(&m->head, m->upgrade);
    if (httphead_count(&m->head, "Host") == 0 &&
        httphead_add(&m->head, "Host", 4, "fuzz.example", 12) < 0)
        return 0;
    evbuffer_drain(f->out, evbuffer_get_length(f->out));
    evbuffer_drain(f->body, evbuffer_get_length(f->body));
    if (http1_write_request_head(f->out, &m->head, m->body, m->content_length) < 0)
        return 0; /* nothing emitted */
    /*
     * The caps bound what vaultgate accepts, not what it sends: the Host it adds, the framing
     * field the writer sets (Content-Length or Transfer-Encoding) or an injected field may take
     * a head that was just under them over. Such a head is not re-parsed.
     */
    if (m->head.nfields + (m->body == HTTP1_BODY_NONE ? 0 : 1) > VG_HEAD_MAX_FIELDS ||
        evbuffer_get_length(f->out) > VG_HEAD_MAX_BYTES)
        return 0;
    f->msg = m;
    return 0;
}

static int fw_body(void *arg, const char *p, size_t n)
{
    struct forward *f = arg;

    if (f->msg == NULL)
        return 0;
    evbuffer_add(f->body, p, n);
    if (f->msg->body == HTTP1_BODY_CHUNKED)
        return http1_write_chunk(f->out, p, n);
    return evbuffer_add(f->out, p, n);
}

static int fw_done(void *arg)
{
    struct forward *f = arg;

    if (f->msg == NULL)
        return 0;
    if (f->msg->body == HTTP1_BODY_CHUNKED && http1_write_last_chunk(f->out) < 0)
        abort();
    check_complete(f->out, f->msg, f->body);
    f->msg = NULL;
    return 0;
}

static const struct http1_callbacks fw_cb = {fw_head, fw_body, fw_done, NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct forward f = {.out = evbuffer_new(), .body = evbuffer_new()};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &fw_cb, &f);
    size_t cuts[2];

    if (p == NULL || f.out == NULL || f.body == NULL)
        abort();
    if (http1_feed(p, (const char *)data, size) >= 0)
        (void)http1_feed_eof(p);
    if (f.msg != NULL)
        check_partial(f.out);
    http1_parser_free(&p);
    evbuffer_free(f.out);
    evbuffer_free(f.body);

    cuts[0] = size / 3;
    cuts[1] = size > 0 ? size - 1 - (data[0] % (size - size / 3)) : 0;
    if (cuts[1] < cuts[0])
        cuts[1] = cuts[0];
    if (digest_run(data, size, NULL, 0, false) != digest_run(data, size, cuts, 2, true))
        abort();
    return 0;
}
