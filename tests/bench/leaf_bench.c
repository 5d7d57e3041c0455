/*
 * leaf_bench.c - how fast ca/ mints leaves and serves cache hits. A benchmark, not a test:
 * it prints numbers and exits 0.
 *
 *   leaf_bench [--mints N] [--hits N] [--threads N]
 *
 * Reports: ca_new() time; leaf_mint() certificates per second on one thread; certcache_get()
 * misses per second (mint + insert); the cost of a hit in ns, for one host and for a full
 * cache of VG_CERTCACHE_MIN hosts visited at random; and hits per second with N threads
 * sharing one cache (the mutex under contention).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/x509.h>

#include "ca/ca.h"
#include "ca/certcache.h"
#include "ca/leaf.h"
#include "common/caps.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of the process: what an operation costs even when other processes share the CPUs. */
static double cpu_s(void)
{
    return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

static char (*make_hosts(size_t n))[32]
{
    char(*h)[32] = malloc(n * sizeof(*h));

    if (h == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        snprintf(h[i], sizeof(h[i]), "h%u.bench.example", (unsigned int)i);
    return h;
}

struct hit_arg {
    struct certcache *c;
    char (*hosts)[32];
    size_t nhosts;
    long rounds;
    unsigned int seed;
};

static void *hit_worker(void *p)
{
    struct hit_arg *a = p;
    char err[128];

    for (long i = 0; i < a->rounds; i++) {
        size_t k = a->nhosts == 1 ? 0 : (size_t)rand_r(&a->seed) % a->nhosts;
        X509 *x = certcache_get(a->c, a->hosts[k], err, sizeof(err));

        if (x == NULL)
            abort();
        X509_free(x);
    }
    return NULL;
}

static double run_hits(struct certcache *c, char (*hosts)[32], size_t nhosts, long rounds,
                       int threads)
{
    pthread_t th[64];
    struct hit_arg args[64];
    double t0 = now_s();

    for (int i = 0; i < threads; i++) {
        args[i] = (struct hit_arg){c, hosts, nhosts, rounds, (unsigned int)i + 1};
        if (pthread_create(&th[i], NULL, hit_worker, &args[i]) != 0)
            abort();
    }
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    long mints = 20000, hits = 2000000;
    int threads = 2;
    struct ca_names names = {false, NULL, 0, NULL, 0};
    char err[512], (*hosts)[32];
    struct ca *ca;
    struct certcache *c;
    double t0, t, c0, c1;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mints") == 0)
            mints = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--hits") == 0)
            hits = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[i + 1]);
    }
    if (mints < VG_CERTCACHE_MIN)
        mints = VG_CERTCACHE_MIN;
    if (threads < 1 || threads > 64)
        threads = 2;
    hosts = make_hosts((size_t)mints);

    t0 = now_s();
    for (int i = 0; i < 10; i++) {
        ca = ca_new("bench", &names, err, sizeof(err));
        if (ca == NULL) {
            fprintf(stderr, "leaf_bench: %s\n", err);
            return 1;
        }
        if (i < 9)
            ca_free(&ca);
    }
    printf("ca_new: %.2f ms\n", (now_s() - t0) / 10 * 1e3);

    c0 = cpu_s();
    t0 = now_s();
    for (long i = 0; i < mints; i++) {
        X509 *x = leaf_mint(ca, hosts[i], err, sizeof(err));

        if (x == NULL) {
            fprintf(stderr, "leaf_bench: %s\n", err);
            return 1;
        }
        X509_free(x);
    }
    t = now_s() - t0;
    c1 = cpu_s() - c0;
    printf("leaf_mint: %ld leaves in %.3f s = %.0f leaves/s (%.1f us each), 1 thread; "
           "process CPU %.1f us each = %.0f leaves/s per core\n",
           mints, t, (double)mints / t, t / (double)mints * 1e6, c1 / (double)mints * 1e6,
           (double)mints / c1);

    c = certcache_new(ca, VG_CERTCACHE_MIN);
    t0 = now_s();
    for (long i = 0; i < VG_CERTCACHE_MIN; i++)
        X509_free(certcache_get(c, hosts[i], err, sizeof(err)));
    t = now_s() - t0;
    printf("certcache miss (mint + insert): %.0f /s\n", VG_CERTCACHE_MIN / t);

    c0 = cpu_s();
    t = run_hits(c, hosts, 1, hits, 1);
    c1 = cpu_s() - c0;
    printf("certcache hit, one host: %.1f ns (process CPU %.1f ns)\n", t / (double)hits * 1e9,
           c1 / (double)hits * 1e9);
    c0 = cpu_s();
    t = run_hits(c, hosts, VG_CERTCACHE_MIN, hits, 1);
    c1 = cpu_s() - c0;
    printf("certcache hit, %d hosts at random: %.1f ns (process CPU %.1f ns)\n", VG_CERTCACHE_MIN,
           t / (double)hits * 1e9, c1 / (double)hits * 1e9);
    t = run_hits(c, hosts, VG_CERTCACHE_MIN, hits, threads);
    printf("certcache hit, %d threads sharing one cache: %.0f hits/s in total (%.1f ns per hit "
           "per thread)\n",
           threads, (double)hits * threads / t, t / (double)hits * 1e9);
    certcache_free(&c);
    ca_free(&ca);
    free(hosts);
    return 0;
}
