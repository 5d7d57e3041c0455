/*
 * cio.h - connection I/O: one connection's socket and, for TLS, its SSL, read and written
 * without a bufferevent (docs/internals/cio.md): a client's (accepted, TLS by cio_accept_tls)
 * or an upstream's (TLS by cio_connect_tls).
 *
 * A persistent read event on the socket is added once; on each readiness SSL_read (or readv)
 * moves into the input evbuffer everything the socket and OpenSSL's read-ahead hold, so no
 * record waits in OpenSSL for the next readiness. Output is written at once by cio_push() when
 * nothing is queued; only what the socket refused is queued, with a write event added exactly
 * while it is. Callbacks, timeouts and watermarks behave like a bufferevent's: read (new input),
 * write (the output drained to its low-water mark), event (end of stream, error, timeout, TLS
 * handshake done).
 *
 * A connection whose consumer still needs a bufferevent (HTTP/2, tunnels) is handed over by
 * cio_to_bufferevent() with its buffered bytes.
 */
#ifndef VG_CIO_H
#define VG_CIO_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/ssl.h>

/* What an event callback is told: where, then what (like BEV_EVENT_*). */
#define CIO_READING   0x01
#define CIO_WRITING   0x02
#define CIO_EOF       0x10
#define CIO_ERROR     0x20
#define CIO_TIMEOUT   0x40
#define CIO_CONNECTED 0x80 /* the TLS handshake is done */

struct cio;

typedef void (*cio_data_cb)(struct cio *io, void *arg);
typedef void (*cio_event_cb)(struct cio *io, short what, void *arg);

/*
 * A plain connection on fd (non-blocking), which it owns from the call on: closed by
 * cio_free(), or at once when this fails. Nothing is read until cio_read(io, true). NULL on
 * out of memory.
 */
struct cio *cio_new(struct event_base *base, evutil_socket_t fd);

/*
 * Accepts TLS on io, taking ssl (freed with io, or at once on failure). Bytes already in the
 * input (a client that spoke early) are the first the handshake reads; output still queued is
 * written in the clear before any TLS byte. The handshake runs from the event loop, never
 * inside this call; its end is an event CIO_CONNECTED (or CIO_ERROR / CIO_EOF). Reading is on
 * from here. 0, or -1 (out of memory).
 */
int cio_accept_tls(struct cio *io, SSL *ssl);

/*
 * Starts a TLS client handshake on io (connected), taking ssl (freed with io, or at once on
 * failure) with its server name and verification already set. The handshake runs from the
 * event loop, never inside this call; its end is an event CIO_CONNECTED (verification is the
 * caller's to check then: SSL_get_verify_result), or CIO_ERROR / CIO_EOF with OpenSSL's reason
 * in cio_ssl_error(), or CIO_READING | CIO_TIMEOUT when the read timeout (cio_set_timeouts) ran
 * out without handshake progress. Reading is on from here. 0, or -1 (out of memory).
 */
int cio_connect_tls(struct cio *io, SSL *ssl);

/* The callbacks (any may be NULL). An end of stream or error that came while the event
 * callback was NULL is reported to the next one set, from the loop. */
void cio_setcb(struct cio *io, cio_data_cb read_cb, cio_data_cb write_cb, cio_event_cb event_cb,
               void *arg);

/* Reading on or off. Off, nothing is read and the read timeout does not run; on again, what
 * OpenSSL still holds is delivered without waiting for the socket. */
void cio_read(struct cio *io, bool on);

/* The read callback runs from the loop once, if reading is still on then, for the input
 * already there (as if it had just arrived; with none, a consumer may still have a step to
 * take, as after bufferevent_trigger). */
void cio_kick(struct cio *io);

/* Read and write timeouts (NULL: none), as bufferevent_set_timeouts: the read timeout runs
 * while reading is on, the write timeout while output is queued; each restarts on progress. */
void cio_set_timeouts(struct cio *io, const struct timeval *rd, const struct timeval *wr);

/* The write callback runs when a write left at most low bytes queued (0: when all is out). */
void cio_set_wlow(struct cio *io, size_t low);

/* The input (made when missing, with the connection idle since cio_free_buffers); NULL when out
 * of memory. */
struct evbuffer *cio_input(struct cio *io);
/* Bytes queued for the socket (written by the write event). Add with cio_push(). */
size_t cio_queued(const struct cio *io);
/* Bytes wait in the input. */
bool cio_has_input(struct cio *io);
/* The write event is added: output is queued (or OpenSSL waits to write). */
bool cio_writing(const struct cio *io);
/* The stream goes on: no end of stream or error seen (reported or not), not stopped or freed.
 * A connection that is not open never reads again: it must not be kept for reuse. */
bool cio_open(const struct cio *io);
SSL *cio_ssl(const struct cio *io);
struct event_base *cio_base(const struct cio *io);
evutil_socket_t cio_fd(const struct cio *io);

/*
 * Sends stage (drained): written to the socket at once while nothing is queued, the rest queued
 * behind the write event. nocopy: stage holds a wiped block or record-sized chains, written
 * chain by chain and never pulled up. A write error is reported by the event callback from
 * the loop.
 */
void cio_push(struct cio *io, struct evbuffer *stage, bool nocopy);

/* The OpenSSL error (ERR_get_error) and errno of the last CIO_ERROR, or 0. */
unsigned long cio_ssl_error(const struct cio *io);
int cio_sys_error(const struct cio *io);

/* TLS record buffers: released now when empty; or whenever empty (SSL_MODE_RELEASE_BUFFERS).
 * cio_free_buffers also frees the input and output evbuffers when empty (made again on use). */
void cio_free_buffers(struct cio *io);
void cio_release_always(struct cio *io);

/* A graceful end of output: close_notify for TLS, then FIN, once the queued output is out.
 * Reading goes on (the caller discards what comes). */
void cio_shutdown(struct cio *io);

/* No more callbacks and no more I/O (a connection closing; cio_free follows). */
void cio_stop(struct cio *io);

/* Closes the connection and frees io (*io NULL'd); safe inside io's own callbacks. */
void cio_free(struct cio **io);

/* Closes and frees what cio_free() left for the loop's next turn: at the end of a loop that
 * will not turn again, before event_base_free(). */
void cio_base_end(struct event_base *base);

/*
 * Hands the connection to a new bufferevent (TLS already open, or plain) that owns the socket
 * and the SSL, with the input read so far in its input and the queued output in its output;
 * options are added to BEV_OPT_CLOSE_ON_FREE (BEV_OPT_DEFER_CALLBACKS for a consumer whose
 * writes must not run its callbacks); *io is freed and NULL'd either way. Safe inside io's
 * callbacks. The consumer must read the input already there itself (no read callback comes for it).
 * NULL on out of memory (the socket is closed).
 */
struct bufferevent *cio_to_bufferevent(struct cio **io, int options);

#endif
