/*
 * cio.c - connection I/O without a bufferevent, for clients and upstreams (see cio.h).
 *
 * Guarantees:
 * - The read event is added once and stays while reading is on and the input is under
 *   VG_CONN_IN_MAX; the write event is added only while output is queued (or the handshake or
 *   OpenSSL waits to write). A connection that never backs up costs one epoll_ctl ADD and one
 *   DEL; the socket is closed one loop turn after the DEL has been applied (no EBADF).
 * - On each readiness every record OpenSSL read ahead is decrypted into the input (the loop
 *   goes on while SSL_has_pending()), and early bytes given to the handshake are read before
 *   the socket.
 * - After an SSL_write that wanted to write, the same bytes lead the output and the retry is
 *   at least as long (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER). A stage pushed with nocopy is
 *   written chain by chain, never pulled up (a pullup would copy a secret into memory freed
 *   unwiped).
 * - Callbacks may free io: the struct itself goes from the loop, after they returned.
 */
#include "proxy/cio.h"
#include "common/caps.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event_struct.h>
#include <openssl/err.h>

#define CIO_RECORD 16384 /* one TLS record per SSL_read / SSL_write */

struct cio {
    struct event rev;  /* the socket's read event; it becomes the closing timer at the end */
    struct event *wev; /* its write event, made when first wanted, freed with idle buffers */
    struct event_base *base;
    evutil_socket_t fd;
    SSL *ssl;
    BIO *early;                /* memory BIO of the client's early bytes: the rbio until drained */
    struct evbuffer *in, *out; /* made on first use; freed when empty and idle (cio_free_buffers) */
    struct evbuffer_cb_entry *in_cb;
    cio_data_cb read_cb, write_cb;
    cio_event_cb event_cb;
    void *arg;
    struct timeval rtv, wtv;
    size_t wlow;
    int wretry; /* the length of an SSL_write to repeat (it wanted to write), or 0 */
    unsigned long ssl_err;
    int sys_err;
    short unreported; /* an end (CIO_EOF / CIO_ERROR) seen with no event callback set */
    bool has_rtv, has_wtv;
    bool reading;     /* the consumer wants input */
    bool eof;         /* the stream ended or failed: nothing more is read */
    bool radded;      /* rev is added */
    bool wadded;      /* wev is added */
    bool hs;          /* the TLS handshake is under way */
    bool client;      /* TLS client (cio_connect_tls): the read timeout runs during the handshake */
    bool raw;         /* the output is written in the clear before the handshake starts */
    bool nocopy;      /* the output holds chains never to be pulled up */
    bool rd_wants_wr; /* SSL_read wanted to write */
    bool wr_wants_rd; /* SSL_write wanted to read */
    bool shut;        /* close_notify and FIN once the output is out */
    bool failed;      /* a write from cio_push() failed: reported from the loop */
    bool kicked;      /* cio_kick(): the read callback runs for the input already there */
    bool stopped;     /* no more callbacks, no more I/O */
    bool dead;        /* freed: only the closing timer is left */
};

static void cio_read_ev(evutil_socket_t fd, short what, void *arg);
static void cio_write_ev(evutil_socket_t fd, short what, void *arg);
static void cio_input_cb(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg);

/* ---- buffers ----------------------------------------------------------------------------- */

static size_t cio_len(const struct evbuffer *b)
{
    return b != NULL ? evbuffer_get_length(b) : 0;
}

/* The input, made when missing. NULL when out of memory. */
static struct evbuffer *cio_in(struct cio *io)
{
    if (io->in == NULL)
        io->in = evbuffer_new();
    return io->in;
}

/* The input's callback comes and goes with the high-water mark: it is there only while the mark
 * holds reading off (a drain under it resumes reading), so the adds and drains of every request
 * run no callback. -1 when out of memory. */
static int cio_watch_drain(struct cio *io, bool on)
{
    if (on && io->in_cb == NULL && io->in != NULL)
        return (io->in_cb = evbuffer_add_cb(io->in, cio_input_cb, io)) != NULL ? 0 : -1;
    if (!on && io->in_cb != NULL) {
        evbuffer_remove_cb_entry(io->in, io->in_cb); /* safe inside the callback itself */
        io->in_cb = NULL;
    }
    return 0;
}

/* The output, made when missing. NULL when out of memory. */
static struct evbuffer *cio_out(struct cio *io)
{
    if (io->out == NULL)
        io->out = evbuffer_new();
    return io->out;
}

/* Frees the input and the output when they hold nothing, and the write event when it waits
 * for nothing (they come back on first use). */
static void cio_drop_empty(struct cio *io)
{
    if (io->wev != NULL && !io->wadded) {
        event_free(io->wev);
        io->wev = NULL;
    }
    if (io->in != NULL && cio_len(io->in) == 0) {
        (void)cio_watch_drain(io, false);
        evbuffer_free(io->in);
        io->in = NULL;
    }
    if (io->out != NULL && cio_len(io->out) == 0) {
        evbuffer_free(io->out);
        io->out = NULL;
    }
}

/* ---- events ------------------------------------------------------------------------------ */

/* rev is wanted: reading on and possible, or the handshake under way (it reads). */
static bool cio_want_read(const struct cio *io)
{
    if (io->stopped || io->dead || io->eof || io->raw)
        return false;
    if (io->hs || io->wr_wants_rd)
        return true;
    return io->reading && cio_len(io->in) < VG_CONN_IN_MAX;
}

static bool cio_want_write(const struct cio *io)
{
    if (io->stopped || io->dead)
        return false;
    return io->rd_wants_wr || (cio_len(io->out) > 0 && !io->hs && !io->wr_wants_rd) || io->raw;
}

static void cio_fail_later(struct cio *io);

/* Adds or deletes rev as cio_want_read() says. Turned on with records in OpenSSL, the read
 * handler runs from the loop without waiting for the socket. Held off by the high-water mark
 * alone, the input gets its drain callback. */
static void cio_update_read(struct cio *io)
{
    bool want = cio_want_read(io);
    bool held;

    if (want && !io->radded) {
        event_add(&io->rev, io->has_rtv && (!io->hs || io->client) ? &io->rtv : NULL);
        io->radded = true;
        if (io->ssl != NULL && !io->hs && SSL_has_pending(io->ssl))
            event_active(&io->rev, EV_READ, 1);
    } else if (!want && io->radded) {
        event_del(&io->rev);
        io->radded = false;
    }
    held = !want && io->reading && !io->eof && !io->stopped && !io->dead && !io->raw &&
           cio_len(io->in) >= VG_CONN_IN_MAX;
    if (held != (io->in_cb != NULL) && cio_watch_drain(io, held) < 0)
        cio_fail_later(io); /* no memory for the callback: reading could never resume */
}

/* An error to report from the loop (a failed push, no memory for the write event): rev runs
 * cio_write_ev, which reports it. */
static void cio_fail_later(struct cio *io)
{
    io->failed = true;
    event_active(&io->rev, EV_WRITE, 1);
}

/* Adds or deletes the write event as cio_want_write() says; made on first need. */
static void cio_update_write(struct cio *io)
{
    bool want = cio_want_write(io);

    if (want && !io->wadded) {
        if (io->wev == NULL && (io->wev = event_new(io->base, io->fd, EV_WRITE | EV_PERSIST,
                                                    cio_write_ev, io)) == NULL) {
            cio_fail_later(io);
            return;
        }
        event_add(io->wev, io->has_wtv ? &io->wtv : NULL);
        io->wadded = true;
    } else if (!want && io->wadded) {
        event_del(io->wev);
        io->wadded = false;
    }
}

/* Runs the event callback for what; true when io is gone or stopped after it. */
static bool cio_report(struct cio *io, short what)
{
    if (what & (CIO_EOF | CIO_ERROR | CIO_TIMEOUT)) {
        if (what & (CIO_EOF | CIO_ERROR))
            io->eof = true;
        if (what & CIO_READING)
            io->reading = false; /* as a bufferevent: reading stops */
        cio_update_read(io);
        cio_update_write(io);
    }
    if (io->event_cb == NULL && (what & (CIO_EOF | CIO_ERROR)))
        io->unreported = what; /* reported once a callback is set (cio_setcb) */
    if (io->event_cb != NULL && !io->stopped)
        io->event_cb(io, what, io->arg);
    return io->dead || io->stopped;
}

/* The OpenSSL error queue's last entry (the queue drained) and errno, for cio_ssl_error(). */
static void cio_note_error(struct cio *io)
{
    unsigned long e;

    io->sys_err = errno;
    io->ssl_err = 0;
    while ((e = ERR_get_error()) != 0)
        io->ssl_err = e;
}

/* What an SSL_get_error() other than WANT_* means: an end of stream (a close_notify, or a
 * close without one: dirty shutdowns are allowed) or an error. */
static short cio_ssl_end(struct cio *io, int e)
{
    cio_note_error(io);
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && io->ssl_err == 0))
        return CIO_EOF;
    return CIO_ERROR;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* The early bytes are read: the socket is the rbio from here. */
static void cio_early_done(struct cio *io)
{
    BIO *sock = SSL_get_wbio(io->ssl);

    BIO_up_ref(sock);
    SSL_set0_rbio(io->ssl, sock); /* frees the memory BIO */
    io->early = NULL;
}

/*
 * SSL_read into the input: once, then while OpenSSL holds more (read ahead, or early bytes),
 * up to VG_CONN_IN_MAX unless all. Returns 0, or CIO_EOF / CIO_ERROR.
 */
static short cio_tls_read(struct cio *io, bool all)
{
    struct evbuffer *in = cio_in(io);
    bool first = true;

    if (in == NULL)
        return CIO_ERROR;
    while (first || SSL_has_pending(io->ssl) || io->early != NULL) {
        struct evbuffer_iovec v;
        int r, e;

        if (!all && evbuffer_get_length(in) >= VG_CONN_IN_MAX)
            return 0;
        if (evbuffer_reserve_space(in, CIO_RECORD, &v, 1) != 1)
            return CIO_ERROR;
        first = false;
        r = SSL_read(io->ssl, v.iov_base, (int)(v.iov_len < INT_MAX ? v.iov_len : INT_MAX));
        if (r > 0) {
            v.iov_len = (size_t)r;
            evbuffer_commit_space(in, &v, 1);
            continue;
        }
        e = SSL_get_error(io->ssl, r);
        if (e == SSL_ERROR_WANT_READ && io->early != NULL && BIO_ctrl_pending(io->early) == 0) {
            cio_early_done(io);
            first = true; /* the socket may hold the rest already */
            continue;
        }
        if (e == SSL_ERROR_WANT_READ)
            return 0;
        if (e == SSL_ERROR_WANT_WRITE) {
            io->rd_wants_wr = true;
            cio_update_write(io);
            return 0;
        }
        return cio_ssl_end(io, e);
    }
    return 0;
}

/* One readv into the input (no FIONREAD). Returns 0, or CIO_EOF / CIO_ERROR. */
static short cio_plain_read(struct cio *io)
{
    struct evbuffer_iovec v[2];
    struct iovec iov[2];
    struct evbuffer *in = cio_in(io);
    int n = in != NULL ? evbuffer_reserve_space(in, CIO_RECORD, v, 2) : -1;
    ssize_t r;

    if (n < 1)
        return CIO_ERROR;
    for (int i = 0; i < n; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    r = readv(io->fd, iov, n);
    if (r > 0) {
        size_t left = (size_t)r;

        for (int i = 0; i < n; i++) {
            v[i].iov_len = left < v[i].iov_len ? left : v[i].iov_len;
            left -= v[i].iov_len;
        }
        evbuffer_commit_space(in, v, n);
        return 0;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    io->sys_err = r == 0 ? 0 : errno;
    io->ssl_err = 0;
    return r == 0 ? CIO_EOF : CIO_ERROR;
}

static void cio_handshake(struct cio *io);
static void cio_write_out(struct cio *io);

/* The socket is readable (or records wait in OpenSSL): input first, then its end. */
static void cio_on_readable(struct cio *io)
{
    size_t before = cio_len(io->in);
    short end = io->ssl != NULL ? cio_tls_read(io, false) : cio_plain_read(io);

    cio_update_read(io);
    if (cio_len(io->in) > before && io->read_cb != NULL) {
        io->read_cb(io, io->arg);
        if (io->dead || io->stopped)
            return;
    }
    if (end != 0) {
        (void)cio_report(io, (short)(CIO_READING | end));
        return;
    }
    if (io->wr_wants_rd && cio_len(io->out) > 0)
        cio_write_out(io); /* an SSL_write that wanted to read */
}

static void cio_read_ev(evutil_socket_t fd, short what, void *arg)
{
    struct cio *io = arg;

    (void)fd;
    if (io->stopped || io->dead)
        return;
    if (io->unreported != 0 && io->event_cb != NULL) { /* cio_setcb() after an end */
        short end = io->unreported;

        io->unreported = 0;
        (void)cio_report(io, end);
        return;
    }
    if (what & EV_WRITE) { /* cio_fail_later() */
        (void)cio_report(io, CIO_WRITING | CIO_ERROR);
        return;
    }
    if (io->kicked && !io->hs && !(what & EV_TIMEOUT)) {
        io->kicked = false; /* the socket, if readable too, is reported again (level) */
        if (io->reading && io->read_cb != NULL)
            io->read_cb(io, io->arg);
        return;
    }
    if (!io->hs && !(what & EV_TIMEOUT) && !cio_want_read(io))
        return; /* activated by hand, and reading went off meanwhile */
    if (io->hs && !(what & EV_TIMEOUT)) {
        cio_handshake(io);
    } else if (what & EV_TIMEOUT) {
        (void)cio_report(io, CIO_READING | CIO_TIMEOUT);
    } else {
        cio_on_readable(io);
    }
}

/* Input drained under the high-water mark: reading resumes (a bufferevent's watermark). */
static void cio_input_cb(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
    struct cio *io = arg;

    (void)b;
    if (info->n_deleted > 0 && !io->radded && io->reading)
        cio_update_read(io);
}

/* ---- writing ---------------------------------------------------------------------------- */

/* SSL_write from buf until it is empty or the socket is full. -1 on an error. */
static int cio_tls_write(struct cio *io, struct evbuffer *buf, bool nocopy)
{
    size_t n;

    while ((n = cio_len(buf)) > 0) {
        size_t len = n < CIO_RECORD ? n : CIO_RECORD;
        unsigned char *p;
        int w, e;

        if (nocopy) {
            struct evbuffer_iovec v;

            if (evbuffer_peek(buf, -1, NULL, &v, 1) < 1)
                return -1;
            p = v.iov_base;
            len = v.iov_len < len ? v.iov_len : len;
        } else {
            p = evbuffer_pullup(buf, (ev_ssize_t)len);
        }
        if (p == NULL)
            return -1;
        w = SSL_write(io->ssl, p, (int)len);
        if (w > 0) {
            evbuffer_drain(buf, (size_t)w);
            io->wretry = 0;
            io->wr_wants_rd = false;
            continue;
        }
        e = SSL_get_error(io->ssl, w);
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
            io->wretry = (int)len;
            io->wr_wants_rd = e == SSL_ERROR_WANT_READ;
            return 0;
        }
        (void)cio_ssl_end(io, e);
        return -1;
    }
    return 0;
}

static int cio_plain_write(struct cio *io, struct evbuffer *buf)
{
    while (cio_len(buf) > 0) {
        int w = evbuffer_write(buf, io->fd);

        if (w > 0)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        io->sys_err = w == 0 ? EPIPE : errno;
        io->ssl_err = 0;
        return -1;
    }
    return 0;
}

/* Writes from buf as the connection speaks now. -1 on an error. */
static int cio_write_buf(struct cio *io, struct evbuffer *buf, bool nocopy)
{
    if (io->ssl != NULL && !io->raw)
        return cio_tls_write(io, buf, nocopy);
    return cio_plain_write(io, buf);
}

/* The output is out: a pending close_notify and FIN go now. */
static void cio_shut_now(struct cio *io)
{
    io->shut = false;
    if (io->ssl != NULL) {
        (void)SSL_shutdown(io->ssl);
        ERR_clear_error();
    }
    shutdown(io->fd, SHUT_WR);
}

/* Writes the queued output; reports an error from the loop's side. */
static void cio_write_out(struct cio *io)
{
    if (cio_write_buf(io, io->out, io->nocopy) < 0) {
        (void)cio_report(io, CIO_WRITING | CIO_ERROR);
        return;
    }
    if (cio_len(io->out) == 0) {
        io->nocopy = false;
        if (io->raw) {
            io->raw = false; /* the clear bytes are out: the handshake begins */
            cio_update_write(io);
            cio_handshake(io);
            return;
        }
        if (io->shut)
            cio_shut_now(io);
    }
    cio_update_write(io);
    cio_update_read(io); /* an SSL_write that wants to read waits for the read event */
}

static void cio_write_ev(evutil_socket_t fd, short what, void *arg)
{
    struct cio *io = arg;

    (void)fd;
    if (io->stopped || io->dead)
        return;
    if (io->hs && !io->raw) {
        cio_handshake(io);
        return;
    }
    if (what & EV_TIMEOUT || io->failed) {
        (void)cio_report(io, CIO_WRITING | (io->failed ? CIO_ERROR : CIO_TIMEOUT));
        return;
    }
    if (io->rd_wants_wr) {
        io->rd_wants_wr = false;
        cio_on_readable(io);
        if (io->dead || io->stopped)
            return;
    }
    cio_write_out(io);
    if (io->dead || io->stopped || io->hs)
        return;
    if (cio_len(io->out) <= io->wlow && io->write_cb != NULL)
        io->write_cb(io, io->arg);
}

/* A push that failed: the stage is dropped, the error reported from the loop (the caller is in
 * the middle of its work). */
static void cio_push_failed(struct cio *io, struct evbuffer *stage)
{
    evbuffer_drain(stage, evbuffer_get_length(stage));
    cio_fail_later(io);
}

void cio_push(struct cio *io, struct evbuffer *stage, bool nocopy)
{
    if (io == NULL || io->dead || stage == NULL || evbuffer_get_length(stage) == 0)
        return;
    if (cio_len(io->out) == 0 && !io->hs && !io->stopped && !io->raw &&
        cio_write_buf(io, stage, nocopy) < 0) {
        cio_push_failed(io, stage);
        return;
    }
    if (evbuffer_get_length(stage) > 0) {
        if (cio_out(io) == NULL || evbuffer_add_buffer(io->out, stage) < 0) {
            cio_push_failed(io, stage);
            return;
        }
        io->nocopy = io->nocopy || nocopy;
    }
    cio_update_write(io);
    cio_update_read(io); /* an SSL_write that wants to read waits for the read event */
}

/* ---- TLS handshake ---------------------------------------------------------------------- */

static void cio_handshake(struct cio *io)
{
    for (;;) {
        int r = SSL_do_handshake(io->ssl), e;

        if (r == 1)
            break;
        e = SSL_get_error(io->ssl, r);
        if (e == SSL_ERROR_WANT_READ && io->early != NULL && BIO_ctrl_pending(io->early) == 0) {
            cio_early_done(io);
            continue;
        }
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            io->rd_wants_wr = e == SSL_ERROR_WANT_WRITE;
            cio_update_read(io);
            cio_update_write(io);
            return;
        }
        (void)cio_report(io, cio_ssl_end(io, e));
        return;
    }
    io->hs = false;
    io->rd_wants_wr = false;
    if (io->radded && io->has_rtv) /* from here with the read timeout */
        event_add(&io->rev, &io->rtv);
    cio_update_read(io);
    cio_update_write(io);
    if (cio_report(io, CIO_CONNECTED))
        return;
    /* the client's first request may have come with its last handshake record */
    if (SSL_has_pending(io->ssl) || io->early != NULL)
        event_active(&io->rev, EV_READ, 1);
}

/* ssl reads and writes the socket from here and is io's (freed at once on failure). 0 or -1. */
static int cio_take_ssl(struct cio *io, SSL *ssl)
{
    BIO *sock = BIO_new_socket((int)io->fd, BIO_NOCLOSE);

    if (sock == NULL) {
        SSL_free(ssl);
        return -1;
    }
    SSL_set_bio(ssl, sock, sock);
    SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    io->ssl = ssl;
    io->hs = true;
    io->reading = true;
    return 0;
}

int cio_connect_tls(struct cio *io, SSL *ssl)
{
    if (cio_take_ssl(io, ssl) < 0)
        return -1;
    SSL_set_connect_state(ssl);
    io->client = true;
    cio_update_read(io);
    cio_update_write(io);
    event_active(&io->rev, EV_READ, 1); /* the ClientHello goes from the loop */
    return 0;
}

int cio_accept_tls(struct cio *io, SSL *ssl)
{
    size_t n = cio_len(io->in);

    if (cio_take_ssl(io, ssl) < 0)
        return -1;
    if (n > 0) {
        /* the client spoke early: its bytes are the first the handshake reads */
        BIO *mem = BIO_new(BIO_s_mem());

        if (mem == NULL ||
            BIO_write(mem, evbuffer_pullup(io->in, (ev_ssize_t)n), (int)n) != (int)n) {
            BIO_free(mem);
            return -1;
        }
        BIO_set_mem_eof_return(mem, -1);
        evbuffer_drain(io->in, n);
        SSL_set0_rbio(ssl, mem); /* drops the socket BIO's read reference (SSL_set_bio took two) */
        io->early = mem;
    }
    SSL_set_accept_state(ssl);
    io->raw = cio_len(io->out) > 0;
    io->has_rtv = io->has_wtv = false;
    if (io->radded)
        event_remove_timer(&io->rev);
    if (io->wadded)
        event_remove_timer(io->wev);
    cio_update_read(io);
    cio_update_write(io);
    if (!io->raw && io->early != NULL)
        event_active(&io->rev, EV_READ, 1); /* from the loop: the early bytes are there */
    return 0;
}

/* ---- the connection --------------------------------------------------------------------- */

struct cio *cio_new(struct event_base *base, evutil_socket_t fd)
{
    struct cio *io = calloc(1, sizeof(*io));

    if (io == NULL) {
        evutil_closesocket(fd);
        return NULL;
    }
    io->base = base;
    io->fd = fd;
    event_assign(&io->rev, base, fd, EV_READ | EV_PERSIST, cio_read_ev, io);
    return io;
}

void cio_setcb(struct cio *io, cio_data_cb read_cb, cio_data_cb write_cb, cio_event_cb event_cb,
               void *arg)
{
    io->read_cb = read_cb;
    io->write_cb = write_cb;
    io->event_cb = event_cb;
    io->arg = arg;
    /* An end that came while no one listened (a pooled connection between its checkout and its
     * new owner): the new owner hears it from the loop. */
    if (event_cb != NULL && io->unreported != 0 && !io->stopped && !io->dead)
        event_active(&io->rev, EV_READ, 1);
}

void cio_read(struct cio *io, bool on)
{
    if (io->reading == on)
        return;
    io->reading = on;
    cio_update_read(io);
}

void cio_set_timeouts(struct cio *io, const struct timeval *rd, const struct timeval *wr)
{
    io->has_rtv = rd != NULL;
    io->has_wtv = wr != NULL;
    if (rd != NULL)
        io->rtv = *rd;
    if (wr != NULL)
        io->wtv = *wr;
    if (io->radded && !io->hs) {
        if (rd != NULL)
            event_add(&io->rev, rd); /* only the timer changes: no system call */
        else
            event_remove_timer(&io->rev);
    }
    if (io->wadded) {
        if (wr != NULL)
            event_add(io->wev, wr);
        else
            event_remove_timer(io->wev);
    }
}

void cio_kick(struct cio *io)
{
    if (io->dead || io->stopped)
        return;
    io->kicked = true;
    event_active(&io->rev, EV_READ, 1);
}

void cio_set_wlow(struct cio *io, size_t low)
{
    io->wlow = low;
}

struct evbuffer *cio_input(struct cio *io)
{
    return cio_in(io);
}

size_t cio_queued(const struct cio *io)
{
    return io != NULL && !io->dead ? cio_len(io->out) : 0;
}

bool cio_has_input(struct cio *io)
{
    return io != NULL && !io->dead && cio_len(io->in) > 0;
}

bool cio_writing(const struct cio *io)
{
    return io->wadded;
}

bool cio_open(const struct cio *io)
{
    return io != NULL && !io->eof && !io->failed && !io->stopped && !io->dead;
}

SSL *cio_ssl(const struct cio *io)
{
    return io->ssl;
}

struct event_base *cio_base(const struct cio *io)
{
    return io->base;
}

evutil_socket_t cio_fd(const struct cio *io)
{
    return io->fd;
}

unsigned long cio_ssl_error(const struct cio *io)
{
    return io->ssl_err;
}

int cio_sys_error(const struct cio *io)
{
    return io->sys_err;
}

void cio_free_buffers(struct cio *io)
{
    if (io->dead)
        return;
    if (io->ssl != NULL && !io->hs)
        SSL_free_buffers(io->ssl);
    cio_drop_empty(io);
}

void cio_release_always(struct cio *io)
{
    if (io->ssl != NULL)
        SSL_set_mode(io->ssl, SSL_MODE_RELEASE_BUFFERS);
}

void cio_shutdown(struct cio *io)
{
    if (io->dead || io->stopped)
        return;
    if (cio_len(io->out) == 0 && !io->hs)
        cio_shut_now(io);
    else
        io->shut = true;
}

void cio_stop(struct cio *io)
{
    io->stopped = true;
    cio_update_read(io);
    cio_update_write(io);
    event_del(&io->rev); /* a pending activation (records in OpenSSL, a deferred error) too */
    if (io->wev != NULL)
        event_del(io->wev);
}

/* The loop turn after the free: the DEL is applied, the socket may close; the struct goes. */
static void cio_close_ev(evutil_socket_t fd, short what, void *arg)
{
    struct cio *io = arg;

    (void)fd;
    (void)what;
    if (io->fd >= 0)
        evutil_closesocket(io->fd);
    free(io);
}

/* cio_base_end()'s search: up to 64 closing timers per pass. */
struct cio_closing {
    size_t n;
    struct cio *io[64];
};

static int cio_closing_find(const struct event_base *base, const struct event *ev, void *arg)
{
    struct cio_closing *cl = arg;

    (void)base;
    if (event_get_callback(ev) != cio_close_ev)
        return 0;
    cl->io[cl->n++] = event_get_callback_arg(ev);
    return cl->n == sizeof(cl->io) / sizeof(cl->io[0]);
}

/* Frees all but the struct; closes the socket (unless keep) from the loop. */
static void cio_release(struct cio *io, bool keep)
{
    static const struct timeval now = {0, 0};

    cio_stop(io);
    io->dead = true;
    if (io->wev != NULL)
        event_free(io->wev);
    io->wev = NULL;
    if (!keep)
        SSL_free(io->ssl);
    io->ssl = NULL;
    io->early = NULL; /* the SSL's */
    if (io->in != NULL) {
        (void)cio_watch_drain(io, false);
        evbuffer_free(io->in);
    }
    if (io->out != NULL)
        evbuffer_free(io->out);
    io->in = io->out = NULL;
    if (keep)
        io->fd = -1;
    event_assign(&io->rev, io->base, -1, 0, cio_close_ev, io);
    event_add(&io->rev, &now);
}

void cio_base_end(struct event_base *base)
{
    struct cio_closing cl = {0};

    for (;;) {
        cl.n = 0;
        (void)event_base_foreach_event(base, cio_closing_find, &cl);
        if (cl.n == 0)
            break;
        for (size_t i = 0; i < cl.n; i++) {
            event_del(&cl.io[i]->rev);
            cio_close_ev(-1, 0, cl.io[i]);
        }
    }
}

void cio_free(struct cio **io)
{
    if (*io == NULL)
        return;
    cio_release(*io, false);
    *io = NULL;
}

struct bufferevent *cio_to_bufferevent(struct cio **iop, int options)
{
    struct cio *io = *iop;
    struct bufferevent *bev = NULL;
    struct evbuffer *in;

    *iop = NULL;
    cio_stop(io);
    if (io->ssl != NULL && !io->hs)
        (void)cio_tls_read(io, true); /* what OpenSSL holds, and the early bytes, go along */
    if (io->hs || io->early != NULL) {
        cio_release(io, false);
        return NULL;
    }
    if (io->ssl == NULL) {
        bev = bufferevent_socket_new(io->base, io->fd, BEV_OPT_CLOSE_ON_FREE | options);
    } else {
        /* owns the SSL and the descriptor from here, even when it fails */
        bev = bufferevent_openssl_socket_new(io->base, io->fd, io->ssl, BUFFEREVENT_SSL_OPEN,
                                             BEV_OPT_CLOSE_ON_FREE | options);
        if (bev != NULL)
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    }
    if (bev == NULL) {
        cio_release(io, io->ssl != NULL);
        return NULL;
    }
    if (io->wretry > 0 && io->out != NULL) /* the retry's bytes lead one chain, as before */
        (void)evbuffer_pullup(io->out, io->wretry);
    in = bufferevent_get_input(bev);
    if (io->ssl == NULL)
        evbuffer_unfreeze(in, 0); /* a socket bufferevent's input is frozen but to its reads */
    if (io->in != NULL)
        evbuffer_add_buffer(in, io->in);
    if (io->ssl == NULL)
        evbuffer_freeze(in, 0);
    if (io->out != NULL)
        evbuffer_add_buffer(bufferevent_get_output(bev), io->out);
    cio_release(io, true);
    return bev;
}
