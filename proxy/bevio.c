/*
 * bevio.c - immediate writes on bufferevents, and records read ahead (see bevio.h).
 *
 * After a WANT_WRITE the same bytes lead the bufferevent's output, as OpenSSL requires for the
 * retry (the bufferevent sets SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
 */
#include "proxy/bevio.h"

#include <limits.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#define BEVIO_RECORD 16384 /* one TLS record per SSL_write */

/* SSL_write from the stage while the bufferevent queues nothing. Returns the bytes left. */
static size_t bevio_ssl_write(struct bevio *io, SSL *ssl, size_t n)
{
    struct evbuffer *out = bufferevent_get_output(io->bev);

    while (n > 0 && evbuffer_get_length(out) == 0) {
        size_t len = n < BEVIO_RECORD ? n : BEVIO_RECORD;
        unsigned char *p;
        int w;

        if (io->nocopy) {
            struct evbuffer_iovec v;

            if (evbuffer_peek(io->stage, -1, NULL, &v, 1) < 1)
                break;
            p = v.iov_base;
            len = v.iov_len < len ? v.iov_len : len;
        } else {
            p = evbuffer_pullup(io->stage, (ev_ssize_t)len);
        }
        if (p == NULL)
            break;
        w = SSL_write(ssl, p, (int)len);
        if (w <= 0) {
            ERR_clear_error();
            break;
        }
        evbuffer_drain(io->stage, (size_t)w);
        n -= (size_t)w;
    }
    return n;
}

void bevio_want_write(struct bufferevent *bev)
{
    if (!(bufferevent_get_enabled(bev) & EV_WRITE))
        bufferevent_enable(bev, EV_WRITE);
}

void bevio_push(struct bevio *io)
{
    struct evbuffer *out;
    SSL *ssl;
    size_t n;

    if (io->bev == NULL || io->stage == NULL || (n = evbuffer_get_length(io->stage)) == 0)
        return;
    out = bufferevent_get_output(io->bev);
    ssl = bufferevent_openssl_get_ssl(io->bev);
    if (ssl != NULL) {
        n = bevio_ssl_write(io, ssl, n);
    } else if (evbuffer_get_length(out) == 0) {
        /* plain socket: the same shortcut with writev */
        evutil_socket_t fd = bufferevent_getfd(io->bev);
        int w = fd >= 0 ? evbuffer_write(io->stage, fd) : -1;

        if (w > 0)
            n -= (size_t)w;
    }
    io->nocopy = false; /* the stage is empty now, or moved on whole (chains, not copies) */
    if (n > 0) {
        evbuffer_add_buffer(out, io->stage);
        bevio_want_write(io->bev);
    } else if (evbuffer_get_length(out) == 0 && (bufferevent_get_enabled(io->bev) & EV_WRITE) &&
               bufferevent_get_underlying(io->bev) == NULL) {
        /* nothing left for the write event: drop it now (with the worker's epoll changelist a
         * pending add is cancelled without a system call) instead of waking for EPOLLOUT. A TLS
         * filter keeps it: disabling would suspend writes of the socket under it, which may
         * still hold bytes the filter produced. */
        bufferevent_disable(io->bev, EV_WRITE);
    }
}

void bevio_pull(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    struct evbuffer *in;

    if (ssl == NULL || !SSL_has_pending(ssl) || !SSL_is_init_finished(ssl))
        return;
    in = bufferevent_get_input(bev);
    while (SSL_has_pending(ssl)) {
        struct evbuffer_iovec v;
        int r, e;

        if (evbuffer_reserve_space(in, BEVIO_RECORD, &v, 1) != 1)
            return;
        r = SSL_read(ssl, v.iov_base, (int)(v.iov_len < INT_MAX ? v.iov_len : INT_MAX));
        if (r > 0) {
            v.iov_len = (size_t)r;
            evbuffer_commit_space(in, &v, 1);
            continue;
        }
        e = SSL_get_error(ssl, r);
        ERR_clear_error();
        /* the rest of a record is not here yet (the socket wakes libevent when it is), or the
         * stream ended: libevent reads that end again from the socket and reports it */
        if (e == SSL_ERROR_SSL)
            bufferevent_trigger_event(bev, BEV_EVENT_READING | BEV_EVENT_ERROR,
                                      BEV_TRIG_DEFER_CALLBACKS);
        return;
    }
}

void bevio_release_always(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);

    if (ssl != NULL)
        SSL_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
}

bool bevio_has_input(struct bufferevent *bev)
{
    SSL *ssl;

    if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
        return true;
    ssl = bufferevent_openssl_get_ssl(bev);
    return ssl != NULL && SSL_has_pending(ssl);
}

size_t bevio_pending(const struct bevio *io)
{
    return (io->stage != NULL ? evbuffer_get_length(io->stage) : 0) +
           (io->bev != NULL ? evbuffer_get_length(bufferevent_get_output(io->bev)) : 0);
}
