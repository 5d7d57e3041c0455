/*
 * test_certcache.c - the certificate cache (ca/certcache.c): hits and misses, LRU eviction
 * (through certcache_new_for_test, without the capacity floor), the floor itself, hosts it
 * refuses, and threads sharing one cache; every leaf it hands out verifies like a strict TLS
 * client verifies it (testca.h).
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "ca/ca_test.h"
#include "ca/certcache.h"
#include "common/caps.h"
#include "tests/unit/testca.h"

Suite *suite_certcache(void);

static struct ca *cc_ca;

static void cc_setup(void)
{
    cc_ca = testca_new(false, NULL, 0, NULL, 0);
}

static void cc_teardown(void)
{
    ca_free(&cc_ca);
}

static X509 *cc_get(struct certcache *c, const char *host)
{
    char err[256] = "";
    X509 *x = certcache_get(c, host, err, sizeof(err));

    ck_assert_msg(x != NULL, "certcache_get(%s): %s", host, err);
    return x;
}

START_TEST(test_cache_hit_miss)
{
    struct certcache *c = certcache_new(cc_ca, 10);
    struct certcache_stats st;
    X509 *a = cc_get(c, "a.example"), *a2 = cc_get(c, "a.example"), *b = cc_get(c, "b.example");

    ck_assert_ptr_eq(a, a2);
    ck_assert_ptr_ne(a, b);
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.misses, 2);
    ck_assert_uint_eq(st.entries, 2);
    X509_free(a);
    X509_free(a2);
    X509_free(b);
    /* the cache kept its own reference */
    a = cc_get(c, "a.example");
    ck_assert_int_eq(testca_verify(cc_ca, a, "a.example"), X509_V_OK);
    X509_free(a);
    certcache_free(&c);
    ck_assert_ptr_null(c);
    certcache_free(&c);
}
END_TEST

START_TEST(test_cache_lru_eviction)
{
    struct certcache *c = certcache_new_for_test(cc_ca, 3);
    struct certcache_stats st;
    X509 *a = cc_get(c, "a.example"), *x;

    X509_free(cc_get(c, "b.example"));
    X509_free(cc_get(c, "c.example"));
    X509_free(cc_get(c, "a.example")); /* a is now the most recent; b the least */
    X509_free(cc_get(c, "d.example")); /* evicts b */
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.entries, 3);
    ck_assert_uint_eq(st.misses, 4);
    ck_assert_uint_eq(st.hits, 1);
    x = cc_get(c, "a.example");
    ck_assert_ptr_eq(x, a); /* still cached */
    X509_free(x);
    x = cc_get(c, "c.example"); /* hit: now b is gone, d and a and c remain */
    X509_free(x);
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.hits, 3);
    X509_free(cc_get(c, "b.example")); /* miss: minted again, evicts d */
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.misses, 5);
    ck_assert_uint_eq(st.entries, 3);
    X509_free(cc_get(c, "d.example"));
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.misses, 6);
    certcache_free(&c);
    /* a reference the caller holds outlives the cache */
    ck_assert_int_eq(testca_verify(cc_ca, a, "a.example"), X509_V_OK);
    X509_free(a);
}
END_TEST

START_TEST(test_cache_capacity_floor)
{
    struct certcache *c = certcache_new(cc_ca, 1);
    struct certcache_stats st;
    char host[64];

    for (int i = 0; i <= VG_CERTCACHE_MIN; i++) {
        snprintf(host, sizeof(host), "h%d.example", i);
        X509_free(cc_get(c, host));
    }
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.entries, VG_CERTCACHE_MIN);
    ck_assert_uint_eq(st.misses, VG_CERTCACHE_MIN + 1);
    X509_free(cc_get(c, "h1.example")); /* still there */
    X509_free(cc_get(c, "h0.example")); /* evicted first */
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.misses, VG_CERTCACHE_MIN + 2);
    certcache_free(&c);
}
END_TEST

START_TEST(test_cache_refuses_bad_hosts)
{
    struct certcache *c = certcache_new(cc_ca, 0);
    struct certcache_stats st;
    char err[256] = "", big[400];

    ck_assert_ptr_null(certcache_get(c, "Bad..Host", err, sizeof(err)));
    ck_assert_str_ne(err, "");
    ck_assert_ptr_null(certcache_get(c, "a,DNS:evil.com", err, sizeof(err)));
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert_ptr_null(certcache_get(c, big, err, sizeof(err)));
    ck_assert_ptr_null(certcache_get(c, NULL, err, sizeof(err)));
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.entries, 0);
    ck_assert_ptr_null(certcache_new(NULL, 10));
    certcache_free(&c);
}
END_TEST

#define CC_THREADS 4
#define CC_ROUNDS  1500
#define CC_HOSTS   40

struct cc_arg {
    struct certcache *c;
    int seed;
    int failures;
};

static void *cc_worker(void *p)
{
    struct cc_arg *a = p;
    char host[64], err[128];

    for (int i = 0; i < CC_ROUNDS; i++) {
        X509 *x;

        snprintf(host, sizeof(host), "t%d.example", (i * 7 + a->seed) % CC_HOSTS);
        x = certcache_get(a->c, host, err, sizeof(err));
        if (x == NULL || X509_check_host(x, host, 0, 0, NULL) != 1)
            a->failures++;
        X509_free(x);
    }
    return NULL;
}

START_TEST(test_cache_threads)
{
    struct certcache *c = certcache_new(cc_ca, 0);
    struct cc_arg args[CC_THREADS];
    pthread_t th[CC_THREADS];
    struct certcache_stats st;
    X509 *x, *y;

    for (int i = 0; i < CC_THREADS; i++) {
        args[i] = (struct cc_arg){c, i * 13, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, cc_worker, &args[i]), 0);
    }
    for (int i = 0; i < CC_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].failures, 0);
    }
    certcache_stats(c, &st);
    ck_assert_uint_eq(st.hits + st.misses, CC_THREADS * CC_ROUNDS);
    ck_assert_uint_eq(st.entries, CC_HOSTS);
    ck_assert_uint_ge(st.misses, CC_HOSTS);
    /* whichever racer won, one certificate per host from now on */
    x = cc_get(c, "t3.example");
    y = cc_get(c, "t3.example");
    ck_assert_ptr_eq(x, y);
    X509_free(x);
    X509_free(y);
    certcache_free(&c);
}
END_TEST

Suite *suite_certcache(void)
{
    Suite *s = suite_create("certcache");
    TCase *tc = tcase_create("certcache");

    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, cc_setup, cc_teardown);
    tcase_add_test(tc, test_cache_hit_miss);
    tcase_add_test(tc, test_cache_lru_eviction);
    tcase_add_test(tc, test_cache_capacity_floor);
    tcase_add_test(tc, test_cache_refuses_bad_hosts);
    tcase_add_test(tc, test_cache_threads);
    suite_add_tcase(s, tc);
    return s;
}
