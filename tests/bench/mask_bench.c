/*
 * mask_bench.c - how fast mask/mask.c masks a response body. A benchmark, not a test: it
 * prints numbers and exits 0.
 *
 *   mask_bench [--mb N] [--feed BYTES] [--case NAME]
 *
 * Each case feeds N MiB (default 256) through mask_feed() in pieces of BYTES (default 65536),
 * draining the output after each feed, and reports MB/s of CPU time (CLOCK_PROCESS_CPUTIME_ID:
 * what masking costs even when other processes share the CPUs). The secret is a canary shaped
 * like an API key (51 bytes, "sk-proj-..."); "bearer" masks its raw form (a value: the masker
 * adds its base64 forms), "basic" also the base64 of user:secret, as inject_forms() gives them.
 * Inputs:
 *
 * - text: English-like words, lines and punctuation (the secret's first byte 's' is common);
 * - random: uniformly random bytes (a download, an image: bench_proxy.sh's bulk answer);
 * - json: an API's JSON answer, with percent-encoded URLs and JSON escapes (\" \/ \n \u00e9);
 * - hostile: nothing but '%', '\', '+', broken escapes and prefixes of the secret, raw and
 *   escaped, none completed;
 * - periodic: a secret of 64 (or 8192) 'a' in a body of 'a' where every byte ends a match;
 * - percents: the same with '%' (every '%' begins an escape that fails: replayed raw);
 * - backslashes: the same with '\', the worst case (every "\\" is both one escaped and two raw
 *   backslashes, so about two partial spellings per byte of the secret stay alive); it runs
 *   1/256 of the volume.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "common/caps.h"
#include "mask/mask.h"

#define BENCH_BODY (1 << 20) /* one generated body, fed over and over */

static const char secret[] = "sk-proj-CANARYq7Zk2Lw9XbT4mR8sV1nY6pD3fG5hJ0uE2aQ4";

static uint64_t bench_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Appends s to b (at *o, capacity BENCH_BODY) as far as it fits. */
static void put(unsigned char *b, size_t *o, const char *s)
{
    size_t n = strlen(s);

    if (n > BENCH_BODY - *o)
        n = BENCH_BODY - *o;
    memcpy(b + *o, s, n);
    *o += n;
}

static void gen_text(unsigned char *b, uint64_t *seed)
{
    static const char *const words[] = {
        "the",  "secret", "session",  "of",     "service", "is",     "masked", "stream",
        "and",  "so",     "response", "server", "sends",   "status", "a",      "request",
        "with", "tokens", "model",    "answer", "this",    "sky",    "skip",   "sk",
        "proj", "since",  "should",   "some",   "string",  "first",  "last",   "message",
    };
    static const char *const seps[] = {" ", " ", " ", " ", ", ", ". ", "\n", " - "};
    size_t o = 0;

    while (o < BENCH_BODY) {
        put(b, &o, words[bench_rng(seed) % (sizeof(words) / sizeof(words[0]))]);
        put(b, &o, seps[bench_rng(seed) % (sizeof(seps) / sizeof(seps[0]))]);
    }
}

static void gen_json(unsigned char *b, uint64_t *seed)
{
    char rec[512];
    size_t o = 0;

    put(b, &o, "{\"data\":[");
    while (o < BENCH_BODY) {
        uint64_t r = bench_rng(seed);

        snprintf(rec, sizeof(rec),
                 "{\"id\":%u,\"object\":\"chat.completion\",\"model\":\"model-%u\","
                 "\"url\":\"https:\\/\\/api.example.com\\/v1\\/items?q=a%%20b%%2Fc&page=%u\","
                 "\"content\":\"Line one\\nline \\\"two\\\" caf\\u00e9 %u%% done\","
                 "\"usage\":{\"prompt_tokens\":%u,\"total_tokens\":%u}},",
                 (unsigned int)(r % 100000), (unsigned int)(r >> 20) % 9,
                 (unsigned int)(r >> 24) % 50, (unsigned int)(r >> 32) % 100,
                 (unsigned int)(r >> 40) % 4000, (unsigned int)(r >> 48) % 8000);
        put(b, &o, rec);
    }
}

static void gen_random(unsigned char *b, uint64_t *seed)
{
    for (size_t o = 0; o < BENCH_BODY; o++)
        b[o] = (unsigned char)(bench_rng(seed) >> 24);
}

/* Prefixes of the secret, raw and spelled, never completed, between escape fragments. */
static void gen_hostile(unsigned char *b, uint64_t *seed)
{
    static const char *const bits[] = {
        "%",         "%%",          "%7",
        "%73",       "%73k",        "%73%6B-pro",
        "\\",        "\\\\",        "\\u",
        "\\u00",     "\\u007",      "\\u0073",
        "+",         "s",           "sk",
        "sk-proj-",  "sk-proj-CAN", "%2",
        "\\/",       "\\\"",        "%5C",
        "sk%2Dproj", "\\u0073k-",   "%25",
        "%%73",      "\\\\u",       "sk-proj-CANARYq7Z",
    };
    size_t o = 0;

    while (o < BENCH_BODY)
        put(b, &o, bits[bench_rng(seed) % (sizeof(bits) / sizeof(bits[0]))]);
}

struct bench_case {
    const char *name;
    void (*gen)(unsigned char *b, uint64_t *seed);
    size_t periodic; /* > 0: the secret is this many `fill`, the body all `fill` */
    unsigned char fill;
    size_t share; /* runs 1/share of the volume */
};

/* Masks `total` bytes of body with forms f[0..nf) in feeds of `feed` bytes; returns MB/s (CPU). */
static double run(const struct inject_form *f, size_t nf, const unsigned char *body, size_t total,
                  size_t feed, uint64_t *hits)
{
    struct mask *m = mask_new(f, nf);
    struct evbuffer *out = evbuffer_new();
    size_t done = 0, at = 0;
    double t0;

    if (m == NULL || out == NULL)
        abort();
    t0 = cpu_s();
    while (done < total) {
        size_t n = feed;

        if (n > BENCH_BODY - at)
            n = BENCH_BODY - at;
        if (mask_feed(m, (const char *)body + at, n, out) != 0)
            abort();
        evbuffer_drain(out, evbuffer_get_length(out));
        at = (at + n) % BENCH_BODY;
        done += n;
    }
    if (mask_finish(m, out) != 0)
        abort();
    *hits = mask_count(m);
    mask_free(&m);
    evbuffer_free(out);
    return (double)total / 1e6 / (cpu_s() - t0);
}

/* forms[1] = base64("x-access-token:" + forms[0]) in b64 (capacity >= 4/3 of that + 4). */
static void basic_form(struct inject_form *forms, unsigned char *b64)
{
    unsigned char plain[VG_SECRET_MAX_BYTES + 32];
    size_t ulen = strlen("x-access-token:");

    memcpy(plain, "x-access-token:", ulen);
    memcpy(plain + ulen, forms[0].bytes, forms[0].len);
    forms[1].bytes = b64;
    forms[1].len = (size_t)EVP_EncodeBlock(b64, plain, (int)(ulen + forms[0].len));
    forms[1].flags = 0; /* a wire encoding */
}

static void bench_one(const struct bench_case *c, size_t mb, size_t feed)
{
    unsigned char *body = malloc(BENCH_BODY), *a = NULL;
    unsigned char *b64 = malloc(4 * (VG_SECRET_MAX_BYTES + 32) / 3 + 8);
    struct inject_form forms[2] = {
        {(const unsigned char *)secret, sizeof(secret) - 1, INJECT_FORM_VALUE}};
    uint64_t seed = 0x9e3779b97f4a7c15u, hits[2];
    double rate[2];

    if (body == NULL || b64 == NULL)
        abort();
    if (c->periodic > 0) {
        a = malloc(c->periodic);
        if (a == NULL)
            abort();
        memset(a, c->fill, c->periodic);
        memset(body, c->fill, BENCH_BODY);
        forms[0] = (struct inject_form){a, c->periodic, INJECT_FORM_VALUE};
    } else {
        c->gen(body, &seed);
    }
    basic_form(forms, b64);
    rate[0] = run(forms, 1, body, (mb << 20) / c->share, feed, &hits[0]);
    rate[1] = run(forms, 2, body, (mb << 20) / c->share, feed, &hits[1]);
    printf("%-14s bearer %8.1f MB/s   basic %8.1f MB/s   (%llu / %llu occurrences)\n", c->name,
           rate[0], rate[1], (unsigned long long)hits[0], (unsigned long long)hits[1]);
    free(a);
    free(b64);
    free(body);
}

int main(int argc, char **argv)
{
    static const struct bench_case cases[] = {
        {"text", gen_text, 0, 0, 1},       {"random", gen_random, 0, 0, 1},
        {"json", gen_json, 0, 0, 1},       {"hostile", gen_hostile, 0, 0, 1},
        {"periodic-64", NULL, 64, 'a', 1}, {"periodic-8192", NULL, 8192, 'a', 1},
        {"percents-64", NULL, 64, '%', 1}, {"backslashes-64", NULL, 64, '\\', 256},
    };
    const char *only = NULL;
    size_t mb = 256, feed = 65536;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--feed") == 0 && i + 1 < argc) {
            feed = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: mask_bench [--mb N] [--feed BYTES] [--case NAME]\n");
            return 2;
        }
    }
    if (mb == 0 || feed == 0) {
        fprintf(stderr, "mask_bench: --mb and --feed must be positive\n");
        return 2;
    }
    printf("mask_feed, %zu MiB per run, %zu-byte feeds, CPU time\n", mb, feed);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (only == NULL || strcmp(only, cases[i].name) == 0)
            bench_one(&cases[i], mb, feed);
    return 0;
}
