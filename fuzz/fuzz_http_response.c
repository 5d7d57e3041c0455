/*
 * fuzz_http_response.c - the response parser on arbitrary upstream bytes.
 *
 * The first input byte picks the method of the request being answered (GET, HEAD, POST,
 * CONNECT) and a cut where the rest is split in two reads. Invariants, abort() when one
 * breaks: no crash or sanitizer report; the body bytes delivered never exceed the input; no
 * callback after an error or after the parser stopped; on_done never comes without a final head;
 * trailers come at most once per message, inside its body, and can be written out again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/caps.h"
#include "http/http1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    size_t body;
    int final_heads, dones, trailers;
    bool in_body;
    bool stopped;
};

static int on_head(void *arg, struct http1_msg *m)
{
    struct seen *s = arg;

    if (s->stopped || m->head.status < 100 || m->head.status > 599)
        abort();
    if (m->head.status >= 200 || m->upgrade) {
        s->final_heads++;
        s->in_body = true;
    }
    return 0;
}

static int on_body(void *arg, const char *p, size_t n)
{
    struct seen *s = arg;

    if (s->stopped || !s->in_body || n == 0)
        abort();
    s->body += n;
    return 0;
}

static int on_done(void *arg)
{
    struct seen *s = arg;

    if (s->stopped || !s->in_body)
        abort();
    s->in_body = false;
    s->trailers = 0;
    s->dones++;
    return 0;
}

/* Trailers: inside a body, once at most, fields that could be serialised again. */
static int on_trailers(void *arg, struct http_head *t)
{
    struct seen *s = arg;
    struct evbuffer *out = evbuffer_new();

    if (s->stopped || !s->in_body || s->trailers++ > 0 || t->nfields == 0 ||
        t->nfields > VG_HEAD_MAX_FIELDS)
        abort();
    if (out == NULL || http1_write_last_chunk_trailers(out, t) < 0)
        abort(); /* the parser let through a field the writer refuses */
    evbuffer_free(out);
    return 0;
}

static const struct http1_callbacks cb = {on_head, on_body, on_done, on_trailers};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "HEAD", "POST", "CONNECT"};
    struct seen s = {0};
    struct http1_parser *p;
    size_t cut, at = 0;
    ssize_t k;

    if (size == 0)
        return 0;
    p = http1_parser_new(HTTP1_RESPONSE, &cb, &s);
    if (p == NULL)
        abort();
    http1_parser_set_request_method(p, methods[data[0] & 3]);
    cut = (size - 1) * (data[0] >> 2) / 63;
    data++;
    size--;
    k = http1_feed(p, (const char *)data, cut);
    if (k >= 0) {
        at = (size_t)k;
        if (at == cut) {
            k = http1_feed(p, (const char *)data + cut, size - cut);
            at += k >= 0 ? (size_t)k : 0;
        }
    }
    s.stopped = k < 0;
    if (k >= 0 && http1_feed_eof(p) < 0)
        s.stopped = true;
    if (s.body > size || at > size || s.dones > s.final_heads)
        abort();
    if (s.stopped && (http1_error(p, NULL) < 400 || http1_feed(p, "x", 1) != -1))
        abort();
    http1_parser_free(&p);
    return 0;
}
