/*
 * exchange_filter.c - the response filter of one exchange (exchange_filter.h): head, trailers
 * and body of a credentialed response through the masker, a gzip/deflate body decoded only as
 * fast as the client takes it, gRPC and WebSocket messages through their own maskers.
 *
 * Guarantees: with masking on, no byte of the body reaches the sink unmasked; a coding that
 * cannot be decoded is refused, never passed; a body that inflates to gigabytes never holds more
 * than the client side's room of decoded bytes (SPEC §4); everything is wiped when freed.
 */
#include "proxy/exchange_filter.h"
#include "mask/grpcmask.h"
#include "mask/mask.h"
#include "mask/wsmask.h"

int exch_filter_start(struct exch_filter *f, struct mask *m, const struct inject_form *forms,
                      size_t n)
{
    f->mask = m != NULL ? m : mask_new(forms, n);
    f->on = true;
    if (f->scratch == NULL)
        f->scratch = evbuffer_new();
    return f->mask != NULL && f->scratch != NULL ? 0 : -1;
}

void exch_filter_free(struct exch_filter *f)
{
    f->on = false;
    mask_free(&f->mask);
    mask_decoder_free(&f->dec);
    wsmask_free(&f->wsm);
    grpcmask_free(&f->gm);
    for (int i = 0; i < 3; i++) {
        struct evbuffer **b = i == 0 ? &f->scratch : i == 1 ? &f->zpend : &f->plain;

        if (*b != NULL)
            evbuffer_free(*b);
        *b = NULL;
    }
}

struct mask *exch_filter_keep(struct exch_filter *f)
{
    struct mask *m = f->clean ? f->mask : NULL;

    if (m != NULL)
        f->mask = NULL;
    return m;
}

void exch_filter_head(struct exch_filter *f, struct http_head *h)
{
    if (f->on)
        mask_head(f->mask, h);
}

int exch_filter_coding(struct exch_filter *f, struct http_head *h, bool *decoded)
{
    const struct http_field *ce = httphead_get(h, "Content-Encoding");
    enum mask_coding coding = httphead_count(h, "Content-Encoding") > 1
                                  ? MASK_CODING_UNSUPPORTED
                                  : mask_coding_parse(ce != NULL ? ce->value : NULL);

    *decoded = false;
    if (coding == MASK_CODING_UNSUPPORTED)
        return -2;
    if (coding == MASK_CODING_IDENTITY)
        return 0;
    f->dec = mask_decoder_new(coding);
    f->zpend = evbuffer_new();
    f->plain = evbuffer_new();
    if (f->dec == NULL || f->zpend == NULL || f->plain == NULL)
        return -1;
    httphead_remove(h, "Content-Encoding");
    *decoded = true;
    return 0;
}

int exch_filter_grpc(struct exch_filter *f, const struct inject_form *forms, size_t n)
{
    if (f->gm != NULL)
        return 0;
    if (f->dec != NULL)
        return -2;
    f->gm = grpcmask_new(forms, n);
    return f->gm != NULL ? 0 : -1;
}

int exch_filter_ws(struct exch_filter *f, struct http_head *h, const struct inject_form *forms,
                   size_t n, bool *bad_ext)
{
    mask_head(f->mask, h);
    *bad_ext = httphead_get(h, "Sec-WebSocket-Extensions") != NULL;
    httphead_remove(h, "Sec-WebSocket-Extensions");
    f->wsm = wsmask_new(forms, n);
    return f->wsm != NULL ? 0 : -1;
}

/* Hands what f->scratch holds to s. 0 or -1. */
static int filter_emit(struct exch_filter *f, const struct exch_sink *s)
{
    if (evbuffer_get_length(f->scratch) == 0)
        return 0;
    return s->emit(s->arg, f->scratch);
}

/* Masks what f->plain holds (decoded bytes) and hands it on. 0 or -1. */
static int filter_mask_plain(struct exch_filter *f, const struct exch_sink *s)
{
    while (evbuffer_get_length(f->plain) > 0) {
        struct evbuffer_iovec v;

        if (evbuffer_peek(f->plain, -1, NULL, &v, 1) < 1 ||
            mask_feed(f->mask, v.iov_base, v.iov_len, f->scratch) < 0)
            return -1;
        evbuffer_drain(f->plain, v.iov_len);
    }
    return filter_emit(f, s);
}

bool exch_filter_blocked(const struct exch_filter *f)
{
    return f->dec != NULL && (f->zmore || evbuffer_get_length(f->zpend) > 0);
}

int exch_filter_drain(struct exch_filter *f, const struct exch_sink *s)
{
    while (exch_filter_blocked(f)) {
        size_t room = s->room(s->arg), used = 0;
        struct evbuffer_iovec v = {NULL, 0};
        int rc;

        if (room == 0)
            return 0;
        if (evbuffer_get_length(f->zpend) > 0 && evbuffer_peek(f->zpend, -1, NULL, &v, 1) < 1)
            return -1;
        rc = mask_decoder_feed_some(f->dec, v.iov_base, v.iov_len, f->plain, room, &used);
        if (rc < 0)
            return -1;
        evbuffer_drain(f->zpend, used);
        f->zmore = rc == 1;
        if (filter_mask_plain(f, s) < 0)
            return -1;
    }
    return 0;
}

int exch_filter_body(struct exch_filter *f, const char *data, size_t len, const struct exch_sink *s)
{
    if (!f->on) {
        if (f->scratch == NULL && (f->scratch = evbuffer_new()) == NULL)
            return -1;
        if (evbuffer_add(f->scratch, data, len) < 0)
            return -1;
        return filter_emit(f, s);
    }
    if (f->gm != NULL) {
        if (grpcmask_feed(f->gm, data, len, f->scratch) < 0)
            return -1;
        return filter_emit(f, s);
    }
    if (f->dec == NULL) {
        if (mask_feed(f->mask, data, len, f->scratch) < 0)
            return -1;
        return filter_emit(f, s);
    }
    if (evbuffer_add(f->zpend, data, len) < 0 || exch_filter_drain(f, s) < 0)
        return -1;
    return exch_filter_blocked(f) ? 1 : 0;
}

int exch_filter_end(struct exch_filter *f, const struct exch_sink *s)
{
    if (!f->on)
        return 0;
    if (f->dec != NULL && mask_decoder_finish(f->dec, f->plain) < 0)
        return -1;
    if (f->gm != NULL && grpcmask_finish(f->gm, f->scratch) < 0)
        return -1;
    if (mask_finish(f->mask, f->scratch) < 0 || filter_emit(f, s) < 0)
        return -1;
    f->clean = true;
    return 0;
}
