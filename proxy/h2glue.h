/*
 * h2glue.h - the nghttp2 glue both HTTP/2 sides share: the client transport (h2conn, a server
 * session) and the pooled upstream connections (h2up, client sessions).
 *
 * One allocator for a session's memory, one way to make a session (callbacks, options, the
 * first SETTINGS), one feed of input and one flush of output over a struct bevio, the DATA
 * provider's copy from a stream's buffer, and the meaning of nghttp2's fatal input errors.
 * Nothing here knows a connection or a stream of either side: the callers keep those, and this
 * file calls nothing of theirs.
 */
#ifndef VG_H2GLUE_H
#define VG_H2GLUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <nghttp2/nghttp2.h>

struct bevio;

#define H2GLUE_LAZY_BLOCKS 4 /* large blocks of a session kept as mappings (h2glue.c) */

/*
 * A session's allocator, embedded in the connection that owns the session and outliving it.
 * Large blocks (the output frame buffer, the HPACK tables) are mapped, their sizes kept here,
 * so that a page costs memory only once something is written to it. wipe: every heap block is
 * cleansed when freed or moved (header blocks carry an injected secret); a mapped block goes
 * back to the kernel whole, which hands out only zeroed pages.
 */
struct h2glue_mem {
    nghttp2_mem mem; /* what nghttp2 is given */
    bool wipe;
    struct h2glue_block {
        void *p;
        size_t n;
    } lazy[H2GLUE_LAZY_BLOCKS];
};

/* Readies m (embedded, zeroed or not) for one session. */
void h2glue_mem_init(struct h2glue_mem *m, bool wipe);

/* Frees the small blocks the calling thread's sessions left for the next ones (a worker, when
 * its loop ends). */
void h2glue_cache_release(void);

/* The bytes of small blocks the calling thread keeps. */
size_t h2glue_cache_bytes(void);

/* What differs between the sessions of the two sides. A NULL callback is not set. */
struct h2glue_setup {
    bool server;
    bool http_checks;                 /* nghttp2's HTTP messaging checks (off: the caller's) */
    const nghttp2_settings_entry *iv; /* the first SETTINGS */
    size_t niv;
    uint32_t deflate_table;    /* HPACK table for the fields sent at most; 0: nghttp2's */
    uint32_t peer_max_streams; /* streams assumed before the peer's SETTINGS; 0: nghttp2's */
    int32_t conn_window;       /* the connection's receive window; 0: the protocol's */
    nghttp2_on_begin_headers_callback begin_headers;
    nghttp2_on_header_callback header;
    nghttp2_on_data_chunk_recv_callback data_chunk;
    nghttp2_on_frame_recv_callback frame_recv;
    nghttp2_on_begin_frame_callback begin_frame;
    nghttp2_on_frame_send_callback frame_send;
    nghttp2_on_stream_close_callback stream_close;
    nghttp2_error_callback2 error;
};

/*
 * A session as `how` says, with user for its callbacks, allocating through mem, its SETTINGS
 * submitted. Window updates are the caller's (no automatic WINDOW_UPDATE): DATA goes back to
 * the peer's windows only through nghttp2_session_consume*(). 0 and *ng, or -1.
 */
int h2glue_session_new(nghttp2_session **ng, const struct h2glue_setup *how, void *user,
                       struct h2glue_mem *mem);

#define H2GLUE_OVER (-1) /* h2glue_recv: the run was over the budget, nothing fed */

/*
 * Feeds the first contiguous run of in to nghttp2 and drains what it read. budget (NULL: none)
 * bounds what may still be read: a longer run is not fed (H2GLUE_OVER), else it shrinks by the
 * run before nghttp2 reads it (so a callback may reset it). Returns the bytes read, 0 when in
 * is empty, or H2GLUE_OVER or nghttp2's fatal error; after an error in is emptied.
 */
ssize_t h2glue_recv(nghttp2_session *ng, struct evbuffer *in, size_t *budget);

/*
 * What a negative h2glue_recv() means: the fixed reason for the log (nghttp2's description,
 * which quotes nothing the peer sent, or a flood's name) and in *code the GOAWAY error to send:
 * ENHANCE_YOUR_CALM for a flood, NO_ERROR for a peer that does not speak HTTP/2 (no GOAWAY),
 * PROTOCOL_ERROR else.
 */
const char *h2glue_recv_error(ssize_t n, uint32_t *code);

/*
 * Moves the frames nghttp2 has into io's stage and pushes them, while io holds less than
 * VG_CONN_OUT_CAP; past it the write watermark becomes half the cap, so the write callback
 * comes back for the rest. wipe: the frames go into blocks of up to a TLS record, cleansed when
 * libevent lets go of them (one SSL_write each, never pulled up). Without, while the socket
 * takes bytes, they are copied into a record's worth of space reserved in the stage (written
 * chain by chain, never pulled up); while it is backed up, appended. 0, or -1 when nghttp2
 * failed (the session is over) or memory ran out.
 */
int h2glue_send(nghttp2_session *ng, struct bevio *io, bool wipe);

/* The largest DATA payload sent: a frame with its 9-byte header fills one TLS record (16 KiB)
 * and so one SSL_write, where a full 16 KiB payload would take a second record for 9 bytes. */
#define H2GLUE_DATA_MAX (16384 - 9)

/*
 * A DATA provider's read from a stream's buffer out: up to len bytes, and at most
 * H2GLUE_DATA_MAX, into buf.
 * NGHTTP2_ERR_DEFERRED (*deferred set) while out is empty and eof not reached;
 * NGHTTP2_DATA_FLAG_EOF in *flags once eof and out is empty. Returns the bytes copied.
 */
ssize_t h2glue_data(struct evbuffer *out, bool eof, bool *deferred, uint8_t *buf, size_t len,
                    uint32_t *flags);

/* Wakes stream id's DATA provider when it deferred (*deferred, cleared). */
void h2glue_resume(nghttp2_session *ng, int32_t id, bool *deferred);

#endif
