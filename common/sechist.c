/*
 * sechist.c - the registry of retired secret values (sechist.h).
 *
 * Guarantees: a value retired once is returned by every later sechist_get() for its name until
 * sechist_clear(); every copy of a value (the registry's and the ones handed out) is wiped when
 * freed; lookups of a name that never retired anything take no lock (the request path of every
 * credential whose secret was never replaced): the list of names is append-only, each entry
 * published whole with a release store, and freed only by sechist_clear() at exit.
 */
#include "common/sechist.h"
#include "common/caps.h"
#include "common/secmem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct hist_val {
    char *value; /* secmem, len + 1 */
    size_t len;
    int64_t expires_ms;
};

struct hist_name {
    struct hist_name *next;
    char name[VG_SECRET_NAME_MAX + 1];
    struct hist_val *vals;
    size_t n, cap;
};

struct sechist_vals {
    size_t n;
    struct hist_val v[];
};

static pthread_mutex_t hist_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct hist_name *) hist_names;
static atomic_size_t hist_total;
static _Atomic uint64_t hist_gen;

/* The entry of name, or NULL (hist_lock held). */
static struct hist_name *find(const char *name)
{
    for (struct hist_name *h = atomic_load_explicit(&hist_names, memory_order_acquire); h != NULL;
         h = h->next) {
        if (strcmp(h->name, name) == 0)
            return h;
    }
    return NULL;
}

/* The entry of name, made if missing (hist_lock held). NULL when out of memory or too long. */
static struct hist_name *find_or_add(const char *name)
{
    struct hist_name *h = find(name);
    size_t nlen = strlen(name);

    if (h != NULL || nlen > VG_SECRET_NAME_MAX || (h = calloc(1, sizeof(*h))) == NULL)
        return h;
    memcpy(h->name, name, nlen + 1);
    h->next = atomic_load_explicit(&hist_names, memory_order_relaxed);
    atomic_store_explicit(&hist_names, h, memory_order_release);
    return h;
}

static bool has_value(const struct hist_name *h, const void *value, size_t len)
{
    for (size_t i = 0; i < h->n; i++) {
        if (h->vals[i].len == len && secmem_equal(h->vals[i].value, value, len))
            return true;
    }
    return false;
}

int sechist_retire(const char *name, const void *value, size_t len, int64_t expires_ms)
{
    struct hist_name *h;
    int rc = -1;

    if (name == NULL || value == NULL || len == 0)
        return 0;
    pthread_mutex_lock(&hist_lock);
    if ((h = find_or_add(name)) == NULL)
        goto out;
    rc = 0;
    if (has_value(h, value, len))
        goto out;
    rc = -1;
    if (h->n == h->cap) {
        size_t cap = h->cap == 0 ? 4 : h->cap * 2;
        struct hist_val *nv = calloc(cap, sizeof(*nv));

        if (nv == NULL)
            goto out;
        if (h->n > 0)
            memcpy(nv, h->vals, h->n * sizeof(*nv));
        free(h->vals);
        h->vals = nv;
        h->cap = cap;
    }
    if ((h->vals[h->n].value = secmem_dup(value, len)) == NULL)
        goto out;
    h->vals[h->n].len = len;
    h->vals[h->n++].expires_ms = expires_ms;
    atomic_fetch_add(&hist_total, 1);
    atomic_fetch_add(&hist_gen, 1);
    rc = 0;
out:
    pthread_mutex_unlock(&hist_lock);
    return rc;
}

size_t sechist_live(const char *name, int64_t now_ms)
{
    const struct hist_name *h;
    size_t n = 0;

    if (atomic_load(&hist_total) == 0 || find(name) == NULL)
        return 0;
    pthread_mutex_lock(&hist_lock);
    if ((h = find(name)) != NULL) {
        for (size_t i = 0; i < h->n; i++)
            n += h->vals[i].expires_ms == 0 || h->vals[i].expires_ms > now_ms;
    }
    pthread_mutex_unlock(&hist_lock);
    return n;
}

uint64_t sechist_gen(void)
{
    return atomic_load(&hist_gen);
}

int sechist_get(const char *name, struct sechist_vals **out)
{
    const struct hist_name *h;
    struct sechist_vals *v = NULL;
    int rc = 0;

    *out = NULL;
    if (name == NULL || atomic_load(&hist_total) == 0 || find(name) == NULL)
        return 0; /* no lock for a secret that never changed */
    pthread_mutex_lock(&hist_lock);
    if ((h = find(name)) == NULL || h->n == 0)
        goto out;
    rc = -1;
    if ((v = calloc(1, sizeof(*v) + h->n * sizeof(v->v[0]))) == NULL)
        goto out;
    for (; v->n < h->n; v->n++) {
        struct hist_val *d = &v->v[v->n];

        if ((d->value = secmem_dup(h->vals[v->n].value, h->vals[v->n].len)) == NULL) {
            sechist_vals_free(&v);
            goto out;
        }
        d->len = h->vals[v->n].len;
        d->expires_ms = h->vals[v->n].expires_ms;
    }
    *out = v;
    rc = 0;
out:
    pthread_mutex_unlock(&hist_lock);
    return rc;
}

size_t sechist_vals_count(const struct sechist_vals *v)
{
    return v != NULL ? v->n : 0;
}

const char *sechist_vals_at(const struct sechist_vals *v, size_t i, size_t *len)
{
    *len = v->v[i].len;
    return v->v[i].value;
}

void sechist_vals_free(struct sechist_vals **vp)
{
    struct sechist_vals *v;

    if (vp == NULL || *vp == NULL)
        return;
    v = *vp;
    *vp = NULL;
    for (size_t i = 0; i < v->n; i++)
        secmem_free(&v->v[i].value, v->v[i].len + 1);
    free(v);
}

void sechist_clear(void)
{
    pthread_mutex_lock(&hist_lock);
    while (atomic_load(&hist_names) != NULL) {
        struct hist_name *h = atomic_load(&hist_names);

        atomic_store(&hist_names, h->next);
        for (size_t i = 0; i < h->n; i++)
            secmem_free(&h->vals[i].value, h->vals[i].len + 1);
        free(h->vals);
        free(h);
    }
    atomic_store(&hist_total, 0);
    atomic_fetch_add(&hist_gen, 1);
    pthread_mutex_unlock(&hist_lock);
}
