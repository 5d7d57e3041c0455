/*
 * exchange_filter.h - the response filter of one exchange: reflection masking (SPEC §4) of
 * everything a credentialed request gets back - head and trailer fields, the body decoded from
 * gzip/deflate under the client's backpressure, gRPC messages, WebSocket messages after a 101.
 * Private to the exchange's files; the masking itself is mask/.
 */
#ifndef VG_EXCHANGE_FILTER_H
#define VG_EXCHANGE_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/buffer.h>

#include "http/http1.h"
#include "policy/inject.h"

struct mask;
struct mask_decoder;
struct wsmask;
struct grpcmask;

struct exch_filter {
    bool on;    /* the request carried a secret: the response is masked */
    bool clean; /* the masker finished its stream: it may serve the next request */
    bool zmore; /* the decoder stopped at its output budget */
    struct mask *mask;
    struct mask_decoder *dec; /* a gzip/deflate body's decoder */
    struct evbuffer *scratch; /* bytes on their way to the transport */
    struct evbuffer *zpend;   /* compressed body bytes waiting for the client to drain */
    struct evbuffer *plain;   /* decoded bytes on their way to the masker */
    struct wsmask *wsm;       /* a credentialed WebSocket after 101 */
    struct grpcmask *gm;      /* a credentialed gRPC response: masked message by message */
};

/* Where the filtered body goes: room() bytes the client side takes now (0 arms the
 * transport's drained call); emit() takes all of buf (0 or -1). */
struct exch_sink {
    size_t (*room)(void *arg);
    int (*emit)(void *arg, struct evbuffer *buf);
    void *arg;
};

/* Masking on, for forms: with m (a masker kept from an earlier request of the same forms,
 * taken) or a new one. 0 or -1. */
int exch_filter_start(struct exch_filter *f, struct mask *m, const struct inject_form *forms,
                      size_t n);

/* Frees what the filter holds (wiped). */
void exch_filter_free(struct exch_filter *f);

/* The masker of a filter that finished its stream cleanly, now the caller's; else NULL. */
struct mask *exch_filter_keep(struct exch_filter *f);

/* Masks the fields of a head or of trailers (nothing when masking is off). */
void exch_filter_head(struct exch_filter *f, struct http_head *h);

/* The content coding of a credentialed final head: identity passes, gzip/deflate are decoded
 * (*decoded: Content-Encoding removed, the length becomes unknown). 0, -1 out of memory, -2 a
 * coding that cannot be decoded (a secret never crosses back unscanned). */
int exch_filter_coding(struct exch_filter *f, struct http_head *h, bool *decoded);

/* A credentialed gRPC response: masked message by message. 0, -1 out of memory, -2 it is
 * content-coded as well. */
int exch_filter_grpc(struct exch_filter *f, const struct inject_form *forms, size_t n);

/* A credentialed 101: the WebSocket's masker; the extension vaultgate never offered is
 * removed (*bad_ext: the 101 named one). 0 or -1. */
int exch_filter_ws(struct exch_filter *f, struct http_head *h, const struct inject_form *forms,
                   size_t n, bool *bad_ext);

/* True while decoded output waits for the client to drain. */
bool exch_filter_blocked(const struct exch_filter *f);

/* len body bytes, masked when masking is on, to s. 0, 1 when the client must drain before
 * more is fed, or -1. */
int exch_filter_body(struct exch_filter *f, const char *data, size_t len,
                     const struct exch_sink *s);

/* Decodes on what waits, while s has room. 0 or -1 (corrupt input, over the decode cap). */
int exch_filter_drain(struct exch_filter *f, const struct exch_sink *s);

/* The body is complete: the decoder's end and the masker's tail to s. 0 or -1. */
int exch_filter_end(struct exch_filter *f, const struct exch_sink *s);

#endif
