/*
 * ca_wipe_check.c - test: no copy of a private key survives on the heap once it is gone.
 *
 * Routes every OpenSSL allocation through a tracking allocator whose free() wipes nothing and
 * returns nothing to the system: freed blocks stay readable in a graveyard. It learns the root
 * key's private scalar through ca_test_root_key_hook just before ca_new() frees the key, then
 * searches every block, live or freed, for the scalar (big- and little-endian, so BIGNUM limbs
 * count too):
 * - after ca_new() and some leaf minting, the root scalar must be nowhere: not in a live block
 *   (a forgotten reference) and not in a freed one (freed without being wiped);
 * - after ca_free(), neither may the intermediate's or the leaf key's scalar;
 * - positive control: while the CA lives, the leaf key's scalar is found.
 * Stack copies made inside OpenSSL's arithmetic are outside what this can see.
 * Exit 0 pass, 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "ca/ca.h"
#include "ca/ca_test.h"
#include "ca/certcache.h"
#include "ca/leaf.h"

struct blk {
    struct blk *next;
    size_t size;
    int dead;
    int pad;
};

static struct blk *blocks;

static void *t_malloc(size_t n, const char *file, int line)
{
    struct blk *b = malloc(sizeof(*b) + (n == 0 ? 1 : n));

    if (b == NULL)
        return NULL;
    b->next = blocks;
    b->size = n;
    b->dead = 0;
    blocks = b;
    return b + 1;
}

static void t_free(void *p, const char *file, int line)
{
    if (p != NULL)
        ((struct blk *)p - 1)->dead = 1; /* kept, unwiped: whatever was left stays visible */
}

static void *t_realloc(void *p, size_t n, const char *file, int line)
{
    void *q;

    if (p == NULL)
        return t_malloc(n, file, line);
    if ((q = t_malloc(n, file, line)) == NULL)
        return NULL;
    memcpy(q, p, ((struct blk *)p - 1)->size < n ? ((struct blk *)p - 1)->size : n);
    t_free(p, file, line);
    return q;
}

struct scalar {
    unsigned char be[32], le[32];
    int set;
};

static struct scalar root_s;

static int get_scalar(EVP_PKEY *k, struct scalar *out)
{
    BIGNUM *bn = NULL;

    if (EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PRIV_KEY, &bn) != 1 ||
        BN_bn2binpad(bn, out->be, 32) != 32) {
        BN_clear_free(bn);
        return 0;
    }
    BN_clear_free(bn);
    for (int i = 0; i < 32; i++)
        out->le[i] = out->be[31 - i];
    out->set = 1;
    return 1;
}

static void grab_root(EVP_PKEY *k)
{
    if (!get_scalar(k, &root_s))
        abort();
}

/* Blocks (live and dead) holding any 16-byte half of the scalar in either byte order. */
static int count_hits(const struct scalar *s, int *live)
{
    const unsigned char *pats[4] = {s->be, s->be + 16, s->le, s->le + 16};
    int hits = 0;

    *live = 0;
    for (struct blk *b = blocks; b != NULL; b = b->next) {
        for (int i = 0; i < 4; i++) {
            if (b->size >= 16 && memmem(b + 1, b->size, pats[i], 16) != NULL) {
                hits++;
                *live += !b->dead;
                break;
            }
        }
    }
    return hits;
}

static int expect(int cond, const char *what)
{
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    return cond ? 0 : 1;
}

int main(void)
{
    static const char *const dns[] = {"api.example.com", "other.org"};
    struct ca_names names = {true, dns, 2, NULL, 0};
    struct scalar inter_s = {0}, leaf_s = {0};
    char err[256];
    struct ca *ca;
    struct certcache *c;
    int fails = 0, hits, live;

    if (!CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free)) {
        fprintf(stderr, "ca_wipe_check: cannot install the allocator\n");
        return 1;
    }
    ca_test_root_key_hook = grab_root;
    if ((ca = ca_new("wipe", &names, err, sizeof(err))) == NULL) {
        fprintf(stderr, "ca_wipe_check: %s\n", err);
        return 1;
    }
    if (!root_s.set || !get_scalar(ca_test_intermediate_key(ca), &inter_s) ||
        !get_scalar(ca_leaf_key(ca), &leaf_s)) {
        fprintf(stderr, "ca_wipe_check: cannot read the scalars\n");
        return 1;
    }
    c = certcache_new(ca, 0);
    for (int i = 0; i < 20; i++) {
        char host[32];

        snprintf(host, sizeof(host), "h%d.api.example.com", i);
        X509_free(certcache_get(c, host, err, sizeof(err)));
        X509_free(leaf_mint(ca, "api.example.com", err, sizeof(err)));
    }

    hits = count_hits(&root_s, &live);
    fails += expect(hits == 0, "root scalar absent from every heap block after ca_new");
    if (hits != 0)
        printf("     found in %d blocks, %d of them live\n", hits, live);
    hits = count_hits(&leaf_s, &live);
    fails += expect(live > 0, "control: the live leaf key's scalar is found");

    certcache_free(&c);
    ca_free(&ca);
    hits = count_hits(&inter_s, &live);
    fails += expect(hits == 0, "intermediate scalar absent after ca_free");
    hits = count_hits(&leaf_s, &live);
    fails += expect(hits == 0, "leaf scalar absent after ca_free");
    hits = count_hits(&root_s, &live);
    fails += expect(hits == 0, "root scalar still absent after ca_free");
    printf("ca_wipe_check: %d failed\n", fails);
    return fails == 0 ? 0 : 1;
}
