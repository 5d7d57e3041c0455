/*
 * bevio.h - sending staged bytes on a bufferevent without waiting for the next loop turn.
 *
 * libevent's bufferevents write only from their write event: every response would cost an
 * EPOLLOUT round trip and two epoll_ctl calls. A connection therefore stages what it produces
 * in an evbuffer of its own and bevio_push() writes it at once (SSL_write or writev) when
 * nothing is queued in the bufferevent, handing only what the socket did not take to the
 * bufferevent. Public libevent API only: the write event is enabled exactly while the
 * bufferevent holds bytes to write, and disabled once a push left nothing queued.
 *
 * Reading: TLS contexts read ahead (one recv() takes every record the socket holds), but
 * libevent 2.1 goes on reading only while SSL_pending() - the rest of the record at hand - is
 * non-zero, so records read ahead would wait in OpenSSL until the socket became readable again.
 * Whoever consumes a TLS bufferevent's input therefore calls bevio_pull() first.
 */
#ifndef VG_BEVIO_H
#define VG_BEVIO_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/bufferevent.h>

/* One side of a connection: its bufferevent and the bytes staged for it. */
struct bevio {
    struct bufferevent *bev; /* NULL once that side is gone */
    struct evbuffer *stage;  /* produced for this side, sent by bevio_push(); may be NULL */
    bool nocopy; /* stage holds a wiped block (a head with a secret) or record-sized chains:
                  * written chain by chain, never pulled up */
};

/*
 * Sends what is staged: written to the socket right away while nothing is queued, the rest
 * (everything, when bytes are already queued, to keep the order) moved to the bufferevent's
 * output with its write event enabled. After a push that left nothing queued the write event is
 * disabled, so no EPOLLOUT wake-up follows. A stage holding a wiped block is written chain by
 * chain, never pulled up (a pullup would copy the secret into memory freed unwiped).
 */
void bevio_push(struct bevio *io);

/* Bytes waiting for this side: staged plus queued in its bufferevent. */
size_t bevio_pending(const struct bevio *io);

/*
 * Moves the records OpenSSL has read ahead into bev's input (a no-op for a plain bufferevent or
 * a handshake in progress). Called by every consumer of a TLS bufferevent's input before it
 * reads that input. A fatal TLS error met here is reported through the bufferevent's event
 * callback (deferred); an end of stream is left for the bufferevent to read from the socket.
 */
void bevio_pull(struct bufferevent *bev);

/*
 * From now on bev's TLS record buffers are released whenever they are empty
 * (SSL_MODE_RELEASE_BUFFERS): for connections that stay open with little traffic (HTTP/2,
 * tunnels) and responses that stream. The TLS contexts leave the mode off, so that a connection
 * busy with short exchanges keeps its buffers (docs/internals/proxy.md, "Record buffers").
 */
void bevio_release_always(struct bufferevent *bev);

/* Bytes wait to be read: in bev's input, or read ahead by OpenSSL. */
bool bevio_has_input(struct bufferevent *bev);

/* Whatever the socket refused stays queued: enable the write event (after adding to the
 * bufferevent's output directly). */
void bevio_want_write(struct bufferevent *bev);

#endif
