/*
 * h2glue.c - the nghttp2 glue of both HTTP/2 sides (see h2glue.h).
 *
 * Guarantees:
 * - A session's heap blocks are cleansed when freed or moved in wipe mode; a mapped block is
 *   unmapped whole. Frames staged in wipe mode sit only in blocks cleansed on release.
 * - Output stops at VG_CONN_OUT_CAP bytes waiting for the socket; input is fed run by run,
 *   within the caller's budget.
 * - Calls nothing of its callers: they reach it, never the other way.
 */
#include "proxy/h2glue.h"
#include "common/asan.h"
#include "common/caps.h"
#include "proxy/bevio.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/crypto.h>

/* ---- session memory --------------------------------------------------------------------- */

/*
 * nghttp2 1.52 gives every session a 16 KiB output frame buffer and a 4 KiB table up front.
 * Blocks of H2GLUE_LAZY_MIN bytes and more are mapped instead of taken from the heap, and their
 * sizes kept beside the connection rather than in them: a page counts towards the process only
 * once something is written to it, so an idle connection that never sent a large frame holds
 * one page of its frame buffer, not four or five, and none of an unused table. A mapped block
 * needs no cleansing: munmap gives its pages back, and the kernel zeroes a page before anyone
 * gets it again. Heap blocks are sized with malloc_usable_size (the whole block is the
 * caller's), so they carry no header of ours.
 */
/* under ASan every block stays on the heap, where it is checked */
#if VG_ASAN
#define H2GLUE_LAZY_MIN SIZE_MAX
#else
#define H2GLUE_LAZY_MIN 4096
#endif

/*
 * Small heap blocks of every session of a thread (a worker) are kept for the next ones:
 * nghttp2 1.52 allocates a stream, its outbound items and their copied fields per request.
 * Kept blocks are classed by their usable size in steps of H2GLUE_STEP bytes, up to
 * H2GLUE_CLASSES steps; a block is kept in the largest class it serves, and a request is served
 * from the smallest class that covers it, or by malloc of the whole class. At most
 * H2GLUE_CACHE_BYTES are kept per thread. A block from a wiping session is cleansed before it
 * is kept, so nothing kept holds a secret. Under ASan nothing is kept.
 */
#define H2GLUE_STEP        64
#define H2GLUE_CLASSES     16 /* blocks up to 1 KiB */
#define H2GLUE_CACHE_BYTES (256 * 1024)

#define H2GLUE_CACHE (!VG_ASAN)

struct glue_free {
    struct glue_free *next;
};

static _Thread_local struct {
    struct glue_free *head[H2GLUE_CLASSES + 1];
    size_t bytes;
} glue_cache;

static void *glue_cache_take(size_t n)
{
    size_t c = n == 0 ? 1 : (n + H2GLUE_STEP - 1) / H2GLUE_STEP;
    struct glue_free *f;

    if (c > H2GLUE_CLASSES)
        return malloc(n);
    if (!H2GLUE_CACHE || (f = glue_cache.head[c]) == NULL)
        return malloc(c * H2GLUE_STEP);
    glue_cache.head[c] = f->next;
    glue_cache.bytes -= c * H2GLUE_STEP;
    return f;
}

/* Keeps heap block p (cleansed when wipe), or frees it. */
static void glue_cache_give(void *p, bool wipe)
{
    size_t usable = malloc_usable_size(p), c = usable / H2GLUE_STEP;
    struct glue_free *f = p;

    if (wipe)
        OPENSSL_cleanse(p, usable);
    if (!H2GLUE_CACHE || c == 0 || c > H2GLUE_CLASSES ||
        glue_cache.bytes + c * H2GLUE_STEP > H2GLUE_CACHE_BYTES) {
        free(p);
        return;
    }
    f->next = glue_cache.head[c];
    glue_cache.head[c] = f;
    glue_cache.bytes += c * H2GLUE_STEP;
}

void h2glue_cache_release(void)
{
    for (size_t c = 0; c <= H2GLUE_CLASSES; c++) {
        while (glue_cache.head[c] != NULL) {
            struct glue_free *f = glue_cache.head[c];

            glue_cache.head[c] = f->next;
            free(f);
        }
    }
    glue_cache.bytes = 0;
}

size_t h2glue_cache_bytes(void)
{
    return glue_cache.bytes;
}

static void *glue_malloc(size_t n, void *ud)
{
    struct h2glue_mem *m = ud;
    void *p;

    if (n < H2GLUE_LAZY_MIN)
        return glue_cache_take(n);
    for (size_t i = 0; i < H2GLUE_LAZY_BLOCKS; i++) {
        if (m->lazy[i].p != NULL)
            continue;
        p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        m->lazy[i].p = p;
        m->lazy[i].n = n;
        return p;
    }
    return glue_cache_take(n); /* more large blocks than expected: the heap */
}

/* The slot of a mapped block, or NULL for a heap block. */
static struct h2glue_block *glue_block_of(struct h2glue_mem *m, void *p)
{
    for (size_t i = 0; p != NULL && i < H2GLUE_LAZY_BLOCKS; i++) {
        if (m->lazy[i].p == p)
            return &m->lazy[i];
    }
    return NULL;
}

static void glue_free(void *p, void *ud)
{
    struct h2glue_mem *m = ud;
    struct h2glue_block *l = glue_block_of(m, p);

    if (l == NULL) {
        if (p != NULL)
            glue_cache_give(p, m->wipe);
        return;
    }
    munmap(l->p, l->n);
    l->p = NULL;
}

static void *glue_calloc(size_t nmemb, size_t size, void *ud)
{
    struct h2glue_mem *m = ud;
    void *p;

    if (size != 0 && nmemb > SIZE_MAX / size)
        return NULL;
    p = glue_malloc(nmemb * size, ud);
    if (p != NULL && glue_block_of(m, p) == NULL)
        memset(p, 0, nmemb * size); /* a mapping is zero already, and stays untouched */
    return p;
}

/* A block that grows moves by copy when it is mapped, or wiped (realloc would free the old
 * place uncleansed); else realloc does it. */
static void *glue_realloc(void *p, size_t n, void *ud)
{
    struct h2glue_mem *m = ud;
    struct h2glue_block *l = glue_block_of(m, p);
    size_t old;
    void *np;

    if (p == NULL)
        return glue_malloc(n, ud);
    if (l == NULL && n < H2GLUE_LAZY_MIN && !m->wipe)
        return realloc(p, n);
    old = l != NULL ? l->n : malloc_usable_size(p);
    if ((np = glue_malloc(n, ud)) == NULL)
        return NULL;
    memcpy(np, p, old < n ? old : n);
    glue_free(p, ud);
    return np;
}

void h2glue_mem_init(struct h2glue_mem *m, bool wipe)
{
    memset(m, 0, sizeof(*m));
    m->wipe = wipe;
    m->mem = (nghttp2_mem){m, glue_malloc, glue_free, glue_calloc, glue_realloc};
}

/* ---- the session ------------------------------------------------------------------------ */

static void glue_set_callbacks(nghttp2_session_callbacks *cb, const struct h2glue_setup *how)
{
    if (how->begin_headers != NULL)
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, how->begin_headers);
    if (how->header != NULL)
        nghttp2_session_callbacks_set_on_header_callback(cb, how->header);
    if (how->data_chunk != NULL)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, how->data_chunk);
    if (how->frame_recv != NULL)
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, how->frame_recv);
    if (how->begin_frame != NULL)
        nghttp2_session_callbacks_set_on_begin_frame_callback(cb, how->begin_frame);
    if (how->frame_send != NULL)
        nghttp2_session_callbacks_set_on_frame_send_callback(cb, how->frame_send);
    if (how->stream_close != NULL)
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, how->stream_close);
    if (how->error != NULL)
        nghttp2_session_callbacks_set_error_callback2(cb, how->error);
}

static void glue_set_options(nghttp2_option *opt, const struct h2glue_setup *how)
{
    nghttp2_option_set_no_auto_window_update(opt, 1);
    if (!how->http_checks)
        nghttp2_option_set_no_http_messaging(opt, 1);
    if (how->deflate_table != 0)
        nghttp2_option_set_max_deflate_dynamic_table_size(opt, how->deflate_table);
    if (how->peer_max_streams != 0)
        nghttp2_option_set_peer_max_concurrent_streams(opt, how->peer_max_streams);
}

int h2glue_session_new(nghttp2_session **ng, const struct h2glue_setup *how, void *user,
                       struct h2glue_mem *mem)
{
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    nghttp2_session *s = NULL;
    int rc = -1;

    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0)
        goto out;
    glue_set_callbacks(cb, how);
    glue_set_options(opt, how);
    if ((how->server ? nghttp2_session_server_new3(&s, cb, user, opt, &mem->mem)
                     : nghttp2_session_client_new3(&s, cb, user, opt, &mem->mem)) != 0)
        goto out;
    if (nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, how->iv, how->niv) != 0 ||
        (how->conn_window != 0 &&
         nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, how->conn_window) != 0))
        goto out;
    *ng = s;
    s = NULL;
    rc = 0;
out:
    nghttp2_session_del(s);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    return rc;
}

/* ---- input ------------------------------------------------------------------------------ */

ssize_t h2glue_recv(nghttp2_session *ng, struct evbuffer *in, size_t *budget)
{
    struct evbuffer_iovec v;
    ssize_t n;

    if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
        return 0;
    if (budget != NULL && v.iov_len > *budget) {
        n = H2GLUE_OVER;
        goto fail;
    }
    if (budget != NULL)
        *budget -= v.iov_len;
    n = nghttp2_session_mem_recv(ng, v.iov_base, v.iov_len);
    if (n < 0)
        goto fail;
    evbuffer_drain(in, (size_t)n);
    return n;
fail:
    evbuffer_drain(in, evbuffer_get_length(in));
    return n;
}

const char *h2glue_recv_error(ssize_t n, uint32_t *code)
{
    switch (n) {
    case H2GLUE_OVER:
        /* nghttp2 1.52 reads CONTINUATION frames without a callback: what a header block may
         * take on the wire is the caller's budget (CVE-2024-27316) */
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS: /* Debian's 1.52 stops a ninth CONTINUATION */
        *code = NGHTTP2_ENHANCE_YOUR_CALM;
        return "continuation_flood";
    case NGHTTP2_ERR_FLOODED:
        *code = NGHTTP2_ENHANCE_YOUR_CALM;
        return "flood";
    case NGHTTP2_ERR_BAD_CLIENT_MAGIC:
        *code = NGHTTP2_NO_ERROR;
        break;
    default:
        *code = NGHTTP2_PROTOCOL_ERROR;
        break;
    }
    return nghttp2_strerror((int)n);
}

/* ---- output ----------------------------------------------------------------------------- */

#define H2GLUE_BLOCK 16384 /* a wiped block: frames gathered up to one TLS record */

static void glue_wipe_block(const void *data, size_t len, void *arg)
{
    (void)arg;
    OPENSSL_cleanse((void *)data, len);
    free((void *)data);
}

/* The wiped block being filled. */
struct glue_blk {
    unsigned char *p;
    size_t len, cap;
};

/* Hands the block filled so far to the stage, held by reference. 0 or -1. */
static int glue_blk_stage(struct bevio *io, struct glue_blk *b)
{
    int rc = 0;

    if (b->p != NULL &&
        evbuffer_add_reference(io->stage, b->p, b->len, glue_wipe_block, NULL) < 0) {
        glue_wipe_block(b->p, b->len, NULL);
        rc = -1;
    } else if (b->p != NULL) {
        io->nocopy = true;
    }
    b->p = NULL;
    b->len = b->cap = 0;
    return rc;
}

/* Copies a frame into the wiped block, a new one when it does not fit. 0 or -1. */
static int glue_blk_add(struct bevio *io, struct glue_blk *b, const uint8_t *p, size_t n)
{
    if (b->p != NULL && b->cap - b->len < n && glue_blk_stage(io, b) < 0)
        return -1;
    if (b->p == NULL) {
        b->cap = n > H2GLUE_BLOCK ? n : H2GLUE_BLOCK;
        if ((b->p = malloc(b->cap)) == NULL)
            return -1;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

/* Space reserved at the end of the stage (no wipe): frames are copied straight into it. */
struct glue_room {
    struct evbuffer_iovec v;
    size_t used;
};

/* Commits what was copied into the reserved space. 0 or -1. */
static int glue_room_commit(struct bevio *io, struct glue_room *r)
{
    int rc;

    if (r->v.iov_base == NULL)
        return 0;
    r->v.iov_len = r->used;
    rc = evbuffer_commit_space(io->stage, &r->v, 1);
    r->v.iov_base = NULL;
    r->used = 0;
    io->nocopy = true; /* chains of a record or more: written as they are, never pulled up */
    return rc;
}

/* Copies a frame into the reserved space; when it does not fit, commits and reserves a record's
 * worth (or the frame's) more, so frames share a chain and one SSL_write. 0 or -1. */
static int glue_room_add(struct bevio *io, struct glue_room *r, const uint8_t *p, size_t n)
{
    if (r->v.iov_base != NULL && r->v.iov_len - r->used < n && glue_room_commit(io, r) < 0)
        return -1;
    if (r->v.iov_base == NULL &&
        evbuffer_reserve_space(io->stage, (ev_ssize_t)(n > H2GLUE_BLOCK ? n : H2GLUE_BLOCK), &r->v,
                               1) != 1) {
        r->v.iov_base = NULL;
        return -1;
    }
    memcpy((unsigned char *)r->v.iov_base + r->used, p, n);
    r->used += n;
    return 0;
}

int h2glue_send(nghttp2_session *ng, struct bevio *io, bool wipe)
{
    struct glue_blk b = {NULL, 0, 0};
    struct glue_room r = {{NULL, 0}, 0};
    /* while the socket is backed up the stage moves to the bufferevent's output as it is:
     * copies there fill small chains, not a reserved record each */
    bool gather = io->bev != NULL && evbuffer_get_length(bufferevent_get_output(io->bev)) == 0;
    int rc = 0;

    for (;;) {
        const uint8_t *p;
        ssize_t n;

        if (bevio_pending(io) + b.len + r.used >= VG_CONN_OUT_CAP) {
            bufferevent_setwatermark(io->bev, EV_WRITE, VG_CONN_OUT_CAP / 2, 0);
            break;
        }
        n = nghttp2_session_mem_send(ng, &p);
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        if (wipe)
            rc = glue_blk_add(io, &b, p, (size_t)n);
        else
            rc = gather ? glue_room_add(io, &r, p, (size_t)n)
                        : evbuffer_add(io->stage, p, (size_t)n);
        if (rc < 0)
            break;
    }
    if (glue_blk_stage(io, &b) < 0 || glue_room_commit(io, &r) < 0)
        rc = -1;
    bevio_push(io);
    return rc;
}

/* ---- DATA ------------------------------------------------------------------------------- */

ssize_t h2glue_data(struct evbuffer *out, bool eof, bool *deferred, uint8_t *buf, size_t len,
                    uint32_t *flags)
{
    size_t n = evbuffer_get_length(out);

    if (n == 0 && !eof) {
        *deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (len > H2GLUE_DATA_MAX)
        len = H2GLUE_DATA_MAX;
    if (n > len)
        n = len;
    if (n > 0 && evbuffer_remove(out, buf, n) != (int)n)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (eof && evbuffer_get_length(out) == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

void h2glue_resume(nghttp2_session *ng, int32_t id, bool *deferred)
{
    if (*deferred) {
        *deferred = false;
        nghttp2_session_resume_data(ng, id);
    }
}
