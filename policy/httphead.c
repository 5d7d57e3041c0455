/*
 * httphead.c - the request/response head model: every string lives in one arena owned by the
 * head.
 *
 * Guarantees: strings handed in are copied, NUL-terminated and never contain NUL, CR or LF; when
 * the arena grows it is compacted (dead strings of replaced targets and removed fields are
 * dropped) and every pointer in the head is moved to the new copy; every byte that leaves the
 * model (a replaced target, a removed field, an outgrown arena, a reset) is wiped first, since
 * an injected secret may be among them. Live bytes stay under HTTPHEAD_MAX_BYTES and fields
 * under HTTPHEAD_MAX_FIELDS. httphead_clear keeps a small arena and field array for the next
 * message (wiped), so a head reused message after message allocates nothing.
 */
#include "policy/httphead.h"

#include <openssl/crypto.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_MIN 1024

static int bytes_ok(const char *s, size_t len)
{
    if (len == 0)
        return 1;
    if (s == NULL)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0' || s[i] == '\r' || s[i] == '\n')
            return 0;
    }
    return 1;
}

static size_t live_bytes(const struct http_head *h)
{
    size_t n = 0;

    if (h->method != NULL)
        n += strlen(h->method) + 1;
    if (h->target != NULL)
        n += h->target_len + 1;
    if (h->reason != NULL)
        n += strlen(h->reason) + 1;
    for (size_t i = 0; i < h->nfields; i++)
        n += h->fields[i].name_len + h->fields[i].value_len + 2;
    return n;
}

/* Copies s (len bytes + NUL) to dst at *off and returns where it went. */
static const char *move_str(char *dst, size_t *off, const char *s, size_t len)
{
    const char *at = dst + *off;

    if (s == NULL)
        return NULL;
    memcpy(dst + *off, s, len + 1);
    *off += len + 1;
    return at;
}

/* Makes room for need more bytes: a new, compacted arena. 0 or -1 (nothing changed). */
static int arena_grow(struct http_head *h, size_t need)
{
    size_t live = live_bytes(h), cap, off = 0;
    char *na;

    if (live + need > HTTPHEAD_MAX_BYTES)
        return -1;
    cap = (live + need) * 2;
    if (cap < ARENA_MIN)
        cap = ARENA_MIN;
    if (cap > HTTPHEAD_MAX_BYTES)
        cap = HTTPHEAD_MAX_BYTES;
    na = malloc(cap);
    if (na == NULL)
        return -1;
    if (h->method != NULL)
        h->method = move_str(na, &off, h->method, strlen(h->method));
    h->target = move_str(na, &off, h->target, h->target_len);
    if (h->reason != NULL)
        h->reason = move_str(na, &off, h->reason, strlen(h->reason));
    for (size_t i = 0; i < h->nfields; i++) {
        struct http_field *f = &h->fields[i];

        f->name = move_str(na, &off, f->name, f->name_len);
        f->value = move_str(na, &off, f->value, f->value_len);
    }
    if (h->arena != NULL)
        OPENSSL_cleanse(h->arena, h->arena_len);
    free(h->arena);
    h->arena = na;
    h->arena_len = off;
    h->arena_cap = cap;
    return 0;
}

static int in_arena(const struct http_head *h, const char *s)
{
    uintptr_t p = (uintptr_t)s, a = (uintptr_t)h->arena;

    return h->arena != NULL && s != NULL && p >= a && p < a + h->arena_cap;
}

/* One string on its way into the arena; tmp holds a copy when s pointed into the arena. */
struct strin {
    const char *s;
    size_t len;
    char *tmp;
};

static void strin_free(struct strin *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (in[i].tmp != NULL)
            OPENSSL_cleanse(in[i].tmp, in[i].len);
        free(in[i].tmp);
        in[i].tmp = NULL;
    }
}

/*
 * Ensures room for all strings of in[] (each plus NUL). Inputs that point into the arena are
 * copied aside first, since growing moves the arena. 0 or -1 (head unchanged).
 */
static int arena_make_room(struct http_head *h, struct strin *in, size_t n)
{
    size_t need = 0;

    for (size_t i = 0; i < n; i++)
        need += in[i].len + 1;
    if (need <= h->arena_cap - h->arena_len)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_arena(h, in[i].s))
            continue;
        if ((in[i].tmp = malloc(in[i].len + 1)) == NULL)
            return -1;
        memcpy(in[i].tmp, in[i].s, in[i].len);
        in[i].s = in[i].tmp;
    }
    return arena_grow(h, need);
}

/* Appends a copy of s; the caller made room with arena_make_room. */
static const char *arena_put(struct http_head *h, const struct strin *in)
{
    char *at = h->arena + h->arena_len;

    if (in->len > 0)
        memcpy(at, in->s, in->len);
    at[in->len] = '\0';
    h->arena_len += in->len + 1;
    return at;
}

static void wipe_str(const char *s, size_t len)
{
    if (s != NULL)
        OPENSSL_cleanse((char *)s, len);
}

void httphead_init(struct http_head *h)
{
    memset(h, 0, sizeof(*h));
    h->version_minor = 1;
}

void httphead_reset(struct http_head *h)
{
    if (h->arena != NULL)
        OPENSSL_cleanse(h->arena, h->arena_len);
    free(h->arena);
    free(h->fields);
    httphead_init(h);
}

void httphead_clear(struct http_head *h)
{
    char *arena = h->arena;
    struct http_field *fields = h->fields;
    size_t arena_cap = h->arena_cap, fields_cap = h->fields_cap;

    if (arena != NULL)
        OPENSSL_cleanse(arena, h->arena_len);
    if (arena_cap > HTTPHEAD_KEEP_BYTES) {
        free(arena);
        arena = NULL;
        arena_cap = 0;
    }
    if (fields_cap > HTTPHEAD_KEEP_FIELDS) {
        free(fields);
        fields = NULL;
        fields_cap = 0;
    }
    httphead_init(h);
    h->arena = arena;
    h->arena_cap = arena_cap;
    h->fields = fields;
    h->fields_cap = fields_cap;
}

int httphead_set_request_line(struct http_head *h, const char *method, size_t mlen,
                              const char *target, size_t tlen, int version_minor)
{
    struct strin in[2] = {{method, mlen, NULL}, {target, tlen, NULL}};
    int rc = -1;

    if (mlen == 0 || !bytes_ok(method, mlen) || memchr(method, ' ', mlen) != NULL || tlen == 0 ||
        !bytes_ok(target, tlen) || memchr(target, ' ', tlen) != NULL)
        return -1;
    if (arena_make_room(h, in, 2) != 0)
        goto out;
    h->method = arena_put(h, &in[0]);
    wipe_str(h->target, h->target_len);
    h->target = arena_put(h, &in[1]);
    h->target_len = tlen;
    h->version_minor = version_minor;
    rc = 0;
out:
    strin_free(in, 2);
    return rc;
}

int httphead_set_status_line(struct http_head *h, int version_minor, int status, const char *reason,
                             size_t rlen)
{
    struct strin in = {reason == NULL ? "" : reason, rlen, NULL};
    int rc = -1;

    if (status < 100 || status > 999 || !bytes_ok(reason, rlen))
        return -1;
    if (arena_make_room(h, &in, 1) != 0)
        goto out;
    h->reason = arena_put(h, &in);
    h->version_minor = version_minor;
    h->status = status;
    rc = 0;
out:
    strin_free(&in, 1);
    return rc;
}

int httphead_set_target(struct http_head *h, const char *target, size_t tlen)
{
    struct strin in = {target, tlen, NULL};
    int rc = -1;

    if (tlen == 0 || !bytes_ok(target, tlen) || memchr(target, ' ', tlen) != NULL)
        return -1;
    if (arena_make_room(h, &in, 1) != 0)
        goto out;
    wipe_str(h->target, h->target_len);
    h->target = arena_put(h, &in);
    h->target_len = tlen;
    rc = 0;
out:
    strin_free(&in, 1);
    return rc;
}

static int fields_reserve(struct http_head *h)
{
    struct http_field *nf;
    size_t cap;

    if (h->nfields < h->fields_cap)
        return 0;
    if (h->nfields >= HTTPHEAD_MAX_FIELDS)
        return -1;
    cap = h->fields_cap == 0 ? 16 : h->fields_cap * 2;
    if (cap > HTTPHEAD_MAX_FIELDS)
        cap = HTTPHEAD_MAX_FIELDS;
    nf = realloc(h->fields, cap * sizeof(*nf));
    if (nf == NULL)
        return -1;
    h->fields = nf;
    h->fields_cap = cap;
    return 0;
}

int httphead_add(struct http_head *h, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (nlen == 0 || !bytes_ok(name, nlen) || memchr(name, ':', nlen) != NULL ||
        !bytes_ok(value, vlen))
        return -1;
    return httphead_add_valid(h, name, nlen, value, vlen);
}

int httphead_add_valid(struct http_head *h, const char *name, size_t nlen, const char *value,
                       size_t vlen)
{
    struct strin in[2] = {{name, nlen, NULL}, {value == NULL ? "" : value, vlen, NULL}};
    struct http_field *f;
    int rc = -1;

    if (fields_reserve(h) != 0 || arena_make_room(h, in, 2) != 0)
        goto out;
    f = &h->fields[h->nfields++];
    f->name = arena_put(h, &in[0]);
    f->name_len = nlen;
    f->value = arena_put(h, &in[1]);
    f->value_len = vlen;
    rc = 0;
out:
    strin_free(in, 2);
    return rc;
}

int httphead_is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* n bytes of a and b equal but for the case of ASCII letters: two bytes that differ must both
 * be letters and differ only in the case bit. */
static inline int ci_eq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned int x = (unsigned char)a[i], y = (unsigned char)b[i];

        if (x != y && ((x | 0x20) != (y | 0x20) || (x | 0x20) - 'a' > 'z' - 'a'))
            return 0;
    }
    return 1;
}

int httphead_name_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && ci_eq(a, b, alen);
}

/* The field's name is name (len bytes), ASCII case-insensitive; inlined in the lookups. */
static inline int name_eq(const struct http_field *f, const char *name, size_t len)
{
    return f->name_len == len && ci_eq(f->name, name, len);
}

size_t httphead_remove(struct http_head *h, const char *name)
{
    size_t len = strlen(name), out = 0, removed = 0;

    for (size_t i = 0; i < h->nfields; i++) {
        if (name_eq(&h->fields[i], name, len)) {
            wipe_str(h->fields[i].value, h->fields[i].value_len);
            removed++;
            continue;
        }
        h->fields[out++] = h->fields[i];
    }
    h->nfields = out;
    return removed;
}

size_t httphead_count(const struct http_head *h, const char *name)
{
    size_t len = strlen(name), n = 0;

    for (size_t i = 0; i < h->nfields; i++)
        n += (size_t)name_eq(&h->fields[i], name, len);
    return n;
}

const struct http_field *httphead_get(const struct http_head *h, const char *name)
{
    size_t len = strlen(name);

    for (size_t i = 0; i < h->nfields; i++) {
        if (name_eq(&h->fields[i], name, len))
            return &h->fields[i];
    }
    return NULL;
}

/* 1 if the comma-separated list in value holds token (ASCII case-insensitive). */
static int list_has(const char *value, size_t vlen, const char *token, size_t tlen)
{
    size_t i = 0;

    while (i < vlen) {
        size_t start, end;

        while (i < vlen && (value[i] == ' ' || value[i] == '\t' || value[i] == ','))
            i++;
        start = i;
        while (i < vlen && value[i] != ',')
            i++;
        end = i;
        while (end > start && (value[end - 1] == ' ' || value[end - 1] == '\t'))
            end--;
        if (end - start == tlen) {
            struct http_field f = {.name = value + start, .name_len = tlen};

            if (name_eq(&f, token, tlen))
                return 1;
        }
    }
    return 0;
}

int httphead_has_token(const struct http_head *h, const char *name, const char *token)
{
    size_t len = strlen(name), tlen = strlen(token);

    for (size_t i = 0; i < h->nfields; i++) {
        if (name_eq(&h->fields[i], name, len) &&
            list_has(h->fields[i].value, h->fields[i].value_len, token, tlen))
            return 1;
    }
    return 0;
}
