/*
 * test_inject.c - suite `inject`: the head model (policy/httphead.c) and byte-exact injection
 * for the four schemes (policy/inject.c), including replacement of every existing instance.
 *
 * Comparisons of heads that carry a secret go through same_bytes(), which never prints them.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/httphead.h"
#include "policy/inject.h"
#include "policy/policy.h"

#define ERRSZ 512

static const char *inject_vault =
    "{\"version\":1,\"secrets\":{"
    "\"B\":{\"value\":\"CANARY-bearer-1\"},"
    "\"U\":{\"value\":\"CANARY-basic-1\"},"
    "\"H\":{\"value\":\"CANARY-header-1\"},"
    "\"Q\":{\"value\":\"CANARY q/v+1~\"}},"
    "\"rules\":["
    "{\"host_pattern\":\"b.example.com\",\"secret\":\"B\",\"scheme\":\"bearer\"},"
    "{\"host_pattern\":\"u.example.com\",\"secret\":\"U\",\"scheme\":\"basic\","
    "\"username\":\"x-access-token\"},"
    "{\"host_pattern\":\"h.example.com\",\"secret\":\"H\",\"scheme\":\"header\","
    "\"name\":\"X-Api-Key\"},"
    "{\"host_pattern\":\"q.example.com\",\"secret\":\"Q\",\"scheme\":\"query\",\"name\":\"key\"},"
    "{\"host_pattern\":\"q2.example.com\",\"secret\":\"B\",\"scheme\":\"query\",\"name\":\"k\"}"
    "]}";

enum { R_BEARER, R_BASIC, R_HEADER, R_QUERY, R_QUERY_PLAIN };

static struct policy *load(void)
{
    char err[ERRSZ];
    struct policy *p = policy_parse(inject_vault, strlen(inject_vault), err, sizeof(err));

    ck_assert_msg(p != NULL, "%s", err);
    return p;
}

/* "METHOD TARGET\nname: value\n..." */
static char *render(const struct http_head *h)
{
    size_t cap = h->target_len + 64, o;
    char *s;

    for (size_t i = 0; i < h->nfields; i++)
        cap += h->fields[i].name_len + h->fields[i].value_len + 3;
    s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    o = (size_t)snprintf(s, cap, "%s %s\n", h->method, h->target);
    for (size_t i = 0; i < h->nfields; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s: %s\n", h->fields[i].name, h->fields[i].value);
    return s;
}

/* Compares without printing: the head carries a (canary) secret. */
static void same_bytes(const char *got, const char *want, const char *what)
{
    ck_assert_msg(strcmp(got, want) == 0, "%s: injected head differs from the expected bytes",
                  what);
}

static void head_with(struct http_head *h, const char *target, const char *const *fields)
{
    httphead_init(h);
    ck_assert_int_eq(httphead_set_request_line(h, "GET", 3, target, strlen(target), 1), 0);
    for (size_t i = 0; fields[i] != NULL; i += 2)
        ck_assert_int_eq(
            httphead_add(h, fields[i], strlen(fields[i]), fields[i + 1], strlen(fields[i + 1])), 0);
}

static const struct {
    int rule;
    const char *target;
    const char *fields[12];
    const char *want;
} inject_cases[] = {
    /* bearer: several existing Authorization fields, any case, collapse into one, in place */
    {R_BEARER,
     "/v1/models",
     {"Host", "b.example.com", "authorization", "Bearer placeholder", "Accept", "*/*",
      "AUTHORIZATION", "Basic Zm9vOmJhcg==", NULL},
     "GET /v1/models\nHost: b.example.com\nAuthorization: Bearer CANARY-bearer-1\nAccept: */*\n"},
    {R_BEARER,
     "/",
     {"Host", "b.example.com", NULL},
     "GET /\nHost: b.example.com\nAuthorization: Bearer CANARY-bearer-1\n"},
    /* basic: base64("x-access-token:CANARY-basic-1") */
    {R_BASIC,
     "/repos",
     {"Host", "u.example.com", "Authorization", "token placeholder", "User-Agent", "git/2", NULL},
     "GET /repos\nHost: u.example.com\nAuthorization: Basic "
     "eC1hY2Nlc3MtdG9rZW46Q0FOQVJZLWJhc2ljLTE=\nUser-Agent: git/2\n"},
    /* header: replaced case-insensitively, every instance; Authorization left alone */
    {R_HEADER,
     "/v1/messages",
     {"Host", "h.example.com", "x-api-key", "placeholder-1", "Authorization", "Bearer keep",
      "X-API-KEY", "placeholder-2", NULL},
     "GET /v1/messages\nHost: h.example.com\nX-Api-Key: CANARY-header-1\n"
     "Authorization: Bearer keep\n"},
    /* query: appended when absent, percent-encoded (unreserved kept, others %XX upper case) */
    {R_QUERY, "/v1/models", {NULL}, "GET /v1/models?key=CANARY%20q%2Fv%2B1~\n"},
    {R_QUERY, "/v1/models?", {NULL}, "GET /v1/models?key=CANARY%20q%2Fv%2B1~\n"},
    {R_QUERY, "/v1/models?alt=json", {NULL}, "GET /v1/models?alt=json&key=CANARY%20q%2Fv%2B1~\n"},
    /* query: an existing parameter appearing twice is replaced in place, once */
    {R_QUERY,
     "/v1/models?key=placeholder&alt=json&key=again",
     {NULL},
     "GET /v1/models?key=CANARY%20q%2Fv%2B1~&alt=json\n"},
    /* names compare after percent-decoding; a bare flag counts; look-alikes stay */
    {R_QUERY,
     "/p?k%65y=x&keyx=1&xkey=2&key&KEY=3",
     {NULL},
     "GET /p?key=CANARY%20q%2Fv%2B1~&keyx=1&xkey=2&KEY=3\n"},
    {R_QUERY, "/p?a=1&&b=2", {NULL}, "GET /p?a=1&&b=2&key=CANARY%20q%2Fv%2B1~\n"},
    {R_QUERY_PLAIN, "/s?k=1&k=2&k=3", {NULL}, "GET /s?k=CANARY-bearer-1\n"},
    {R_QUERY_PLAIN, "/s?k=1#frag", {NULL}, "GET /s?k=CANARY-bearer-1#frag\n"},
};

START_TEST(test_inject_table)
{
    struct policy *p = load();
    struct http_head h;
    char *got, what[32];

    head_with(&h, inject_cases[_i].target, inject_cases[_i].fields);
    ck_assert_int_eq(inject_apply(&h, p, inject_cases[_i].rule), 0);
    got = render(&h);
    snprintf(what, sizeof(what), "case %d", _i);
    same_bytes(got, inject_cases[_i].want, what);
    free(got);
    httphead_reset(&h);
    policy_unref(&p);
}
END_TEST

START_TEST(test_inject_refusals)
{
    struct policy *p = load();
    struct http_head h;
    const char *none[] = {NULL};

    /* query needs an origin-form target */
    head_with(&h, "http://q.example.com/x?key=1", none);
    ck_assert_int_eq(inject_apply(&h, p, R_QUERY), -1);
    httphead_reset(&h);
    head_with(&h, "*", none);
    ck_assert_int_eq(inject_apply(&h, p, R_QUERY), -1);
    httphead_reset(&h);
    /* a rule that does not exist */
    head_with(&h, "/", none);
    ck_assert_int_eq(inject_apply(&h, p, 99), -1);
    ck_assert_int_eq(inject_apply(&h, p, -1), -1);
    ck_assert_int_eq(inject_apply(NULL, p, 0), -1);
    ck_assert_uint_eq(h.nfields, 0);
    httphead_reset(&h);
    policy_unref(&p);
}
END_TEST

/* 1 when want is one of the forms with exactly the given flags (a value, or a wire form). */
static int has_form_flags(const struct inject_form *f, size_t n, const char *want,
                          unsigned int flags)
{
    for (size_t i = 0; i < n; i++) {
        if (f[i].len == strlen(want) && memcmp(f[i].bytes, want, f[i].len) == 0)
            return f[i].flags == flags;
    }
    return 0;
}

static int has_form(const struct inject_form *f, size_t n, const char *want)
{
    return has_form_flags(f, n, want, INJECT_FORM_VALUE);
}

START_TEST(test_inject_forms)
{
    struct policy *p = load();
    struct inject_form f[INJECT_MAX_FORMS];
    size_t n;

    n = inject_forms(p, R_BEARER, f);
    ck_assert_uint_eq(n, 1);
    ck_assert(has_form(f, n, "CANARY-bearer-1"));
    n = inject_forms(p, R_BASIC, f);
    ck_assert_uint_eq(n, 2);
    ck_assert(has_form(f, n, "CANARY-basic-1"));
    /* basic's base64 of user:secret is a wire form: the masker adds no base64 of it */
    ck_assert(has_form_flags(f, n, "eC1hY2Nlc3MtdG9rZW46Q0FOQVJZLWJhc2ljLTE=", 0));
    n = inject_forms(p, R_HEADER, f);
    ck_assert_uint_eq(n, 1);
    ck_assert(has_form(f, n, "CANARY-header-1"));
    /* the percent-encoded query value is a spelling of the raw form, not a form of its own */
    n = inject_forms(p, R_QUERY, f);
    ck_assert_uint_eq(n, 1);
    ck_assert(has_form(f, n, "CANARY q/v+1~"));
    n = inject_forms(p, R_QUERY_PLAIN, f);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(inject_forms(p, 42, f), 0);
    policy_unref(&p);
}
END_TEST

/* ---- the head model ---- */

START_TEST(test_httphead_basics)
{
    struct http_head h;
    const struct http_field *f;

    httphead_init(&h);
    ck_assert_int_eq(httphead_set_request_line(&h, "POST", 4, "/a?b", 4, 0), 0);
    ck_assert_str_eq(h.method, "POST");
    ck_assert_str_eq(h.target, "/a?b");
    ck_assert_int_eq(h.version_minor, 0);
    ck_assert_int_eq(httphead_add(&h, "Connection", 10, "keep-alive, Upgrade", 19), 0);
    ck_assert_int_eq(httphead_add(&h, "Accept", 6, "", 0), 0);
    ck_assert_int_eq(httphead_add(&h, "accept", 6, "text/plain", 10), 0);
    ck_assert_uint_eq(httphead_count(&h, "ACCEPT"), 2);
    f = httphead_get(&h, "Accept");
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->value, "");
    ck_assert_int_eq(httphead_has_token(&h, "connection", "upgrade"), 1);
    ck_assert_int_eq(httphead_has_token(&h, "connection", "keep"), 0);
    ck_assert_int_eq(httphead_has_token(&h, "accept", "text/plain"), 1);
    ck_assert_uint_eq(httphead_remove(&h, "accept"), 2);
    ck_assert_uint_eq(httphead_count(&h, "accept"), 0);
    ck_assert_ptr_null(httphead_get(&h, "accept"));
    ck_assert_uint_eq(h.nfields, 1);
    /* CR, LF, NUL and colons in names are refused; nothing is added */
    ck_assert_int_eq(httphead_add(&h, "X-A", 3, "a\r\nX-B: b", 10), -1);
    ck_assert_int_eq(httphead_add(&h, "X-A", 3, "a\0b", 3), -1);
    ck_assert_int_eq(httphead_add(&h, "X:A", 3, "a", 1), -1);
    ck_assert_int_eq(httphead_add(&h, "", 0, "a", 1), -1);
    ck_assert_int_eq(httphead_set_target(&h, "/a b", 4), -1);
    ck_assert_uint_eq(h.nfields, 1);
    ck_assert_str_eq(h.target, "/a?b");
    ck_assert_int_eq(httphead_set_status_line(&h, 1, 204, "No Content", 10), 0);
    ck_assert_int_eq(h.status, 204);
    ck_assert_str_eq(h.reason, "No Content");
    httphead_reset(&h);
    ck_assert_ptr_null(h.arena);
    ck_assert_uint_eq(h.nfields, 0);
    httphead_reset(&h);
}
END_TEST

/* NUL, CR and LF are refused wherever they stand in a name or value (the check takes eight
 * bytes at a time, then the rest); every other byte, the neighbours of those three included,
 * is taken. */
START_TEST(test_httphead_refused_bytes)
{
    static const unsigned char bad[] = {'\0', '\r', '\n'};
    static const unsigned char near[] = {0x01, 0x09, 0x0b, 0x0c, 0x0e, 0x7f,
                                         0x80, 0x8a, 0x8d, 0xff, 0x2d, 0x2c};
    struct http_head h;
    char v[40];

    httphead_init(&h);
    for (size_t len = 1; len <= sizeof(v); len++) {
        for (size_t at = 0; at < len; at++) {
            for (size_t k = 0; k < sizeof(bad); k++) {
                memset(v, 'a', sizeof(v));
                v[at] = (char)bad[k];
                ck_assert_int_eq(httphead_add(&h, "X-V", 3, v, len), -1);
                ck_assert_int_eq(httphead_add(&h, v, len, "x", 1), -1);
            }
        }
    }
    ck_assert_uint_eq(h.nfields, 0);
    for (size_t k = 0; k < sizeof(near); k++) {
        memset(v, near[k], sizeof(v));
        ck_assert_int_eq(httphead_add(&h, "X-V", 3, v, sizeof(v)), 0);
        ck_assert_int_eq(httphead_add(&h, "X-V", 3, v, 9), 0);
    }
    ck_assert_uint_eq(h.nfields, 2 * sizeof(near));
    httphead_reset(&h);
}
END_TEST

/* Names compare equal exactly when they differ only in the case of ASCII letters: every pair
 * of bytes, and a longer name. */
START_TEST(test_httphead_name_eq_bytes)
{
    for (unsigned int x = 0; x < 256; x++) {
        for (unsigned int y = 0; y < 256; y++) {
            char a = (char)x, b = (char)y;
            unsigned int lx = x >= 'A' && x <= 'Z' ? x + 32 : x;
            unsigned int ly = y >= 'A' && y <= 'Z' ? y + 32 : y;

            ck_assert_int_eq(httphead_name_eq(&a, 1, &b, 1), lx == ly);
        }
    }
    ck_assert(httphead_name_eq("Content-Length", 14, "content-length", 14));
    ck_assert(!httphead_name_eq("Content-Length", 14, "content-lengtH ", 15));
    ck_assert(!httphead_name_eq("X-A^b", 5, "x-a~B", 5));
    ck_assert(!httphead_name_eq("x-[", 3, "X-{", 3));
}
END_TEST

START_TEST(test_httphead_clear)
{
    struct http_head h;
    const char *arena;
    const struct http_field *fields;
    char name[32];

    httphead_init(&h);
    ck_assert_int_eq(httphead_set_request_line(&h, "GET", 3, "/one", 4, 0), 0);
    ck_assert_int_eq(httphead_add(&h, "Authorization", 13, "Bearer sk-SECRET", 16), 0);
    arena = h.arena;
    fields = h.fields;
    httphead_clear(&h);
    /* empty like a reset head, but the small arena and field array are kept, wiped */
    ck_assert_ptr_null(h.method);
    ck_assert_ptr_null(h.target);
    ck_assert_ptr_null(h.reason);
    ck_assert_uint_eq(h.nfields, 0);
    ck_assert_uint_eq(h.arena_len, 0);
    ck_assert_int_eq(h.version_minor, 1);
    ck_assert_int_eq(h.status, 0);
    ck_assert_ptr_eq(h.arena, arena);
    ck_assert_ptr_eq(h.fields, fields);
    ck_assert_ptr_null(memmem(h.arena, h.arena_cap, "sk-SECRET", 9));
    /* the next message goes into the same storage */
    ck_assert_int_eq(httphead_set_request_line(&h, "POST", 4, "/two", 4, 1), 0);
    ck_assert_int_eq(httphead_add(&h, "Host", 4, "a.example", 9), 0);
    ck_assert_ptr_eq(h.arena, arena);
    ck_assert_ptr_eq(h.fields, fields);
    ck_assert_str_eq(h.method, "POST");
    ck_assert_str_eq(h.target, "/two");
    ck_assert_uint_eq(httphead_count(&h, "authorization"), 0);
    ck_assert_str_eq(httphead_get(&h, "host")->value, "a.example");
    /* an outgrown head gives its storage back */
    for (int i = 0; i < HTTPHEAD_KEEP_FIELDS + 1; i++) {
        int n = snprintf(name, sizeof(name), "X-F%d", i);

        ck_assert_int_eq(httphead_add(&h, name, (size_t)n, "v", 1), 0);
    }
    ck_assert_uint_gt(h.fields_cap, HTTPHEAD_KEEP_FIELDS);
    httphead_clear(&h);
    ck_assert_ptr_null(h.fields);
    ck_assert_uint_eq(h.fields_cap, 0);
    ck_assert_ptr_nonnull(h.arena);
    ck_assert_int_eq(httphead_add(&h, "X-Big", 5, NULL, 0), 0);
    {
        static char big[HTTPHEAD_KEEP_BYTES];

        memset(big, 'b', sizeof(big));
        ck_assert_int_eq(httphead_add(&h, "X-Big", 5, big, sizeof(big)), 0);
    }
    ck_assert_uint_gt(h.arena_cap, HTTPHEAD_KEEP_BYTES);
    httphead_clear(&h);
    ck_assert_ptr_null(h.arena);
    ck_assert_uint_eq(h.arena_cap, 0);
    httphead_clear(&h);
    httphead_reset(&h);
    ck_assert_ptr_null(h.arena);
    ck_assert_ptr_null(h.fields);
}
END_TEST

START_TEST(test_httphead_growth)
{
    struct http_head h;
    char name[32], value[600];

    httphead_init(&h);
    ck_assert_int_eq(httphead_set_request_line(&h, "GET", 3, "/start", 6, 1), 0);
    /* many fields: the arena grows and moves; every string must follow */
    for (int i = 0; i < 150; i++) {
        int n = snprintf(name, sizeof(name), "X-F%d", i);

        memset(value, 'a' + i % 26, sizeof(value));
        ck_assert_int_eq(httphead_add(&h, name, (size_t)n, value, (size_t)(100 + i)), 0);
    }
    for (int i = 0; i < 150; i++) {
        snprintf(name, sizeof(name), "X-F%d", i);
        ck_assert_str_eq(h.fields[i].name, name);
        ck_assert_uint_eq(h.fields[i].value_len, (size_t)(100 + i));
        ck_assert_int_eq(h.fields[i].value[99], 'a' + i % 26);
        ck_assert_int_eq(h.fields[i].value[h.fields[i].value_len], '\0');
    }
    ck_assert_str_eq(h.method, "GET");
    ck_assert_str_eq(h.target, "/start");
    /* a target taken from the head itself survives a move of the arena */
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(
            httphead_set_target(&h, h.fields[i % 150].value, h.fields[i % 150].value_len), 0);
    ck_assert_uint_eq(h.target_len, h.fields[199 % 150].value_len);
    /* the field cap */
    for (size_t i = h.nfields; i < HTTPHEAD_MAX_FIELDS; i++)
        ck_assert_int_eq(httphead_add(&h, "X", 1, "y", 1), 0);
    ck_assert_int_eq(httphead_add(&h, "X", 1, "y", 1), -1);
    httphead_reset(&h);
}
END_TEST

START_TEST(test_httphead_byte_cap)
{
    struct http_head h;
    char *big = malloc(HTTPHEAD_MAX_BYTES);

    memset(big, 'v', HTTPHEAD_MAX_BYTES);
    httphead_init(&h);
    ck_assert_int_eq(httphead_add(&h, "X", 1, big, HTTPHEAD_MAX_BYTES - 3), 0);
    ck_assert_int_eq(httphead_add(&h, "Y", 1, "z", 1), -1);
    ck_assert_uint_eq(h.nfields, 1);
    ck_assert_uint_eq(httphead_remove(&h, "X"), 1);
    /* removed bytes no longer count once the arena is compacted */
    ck_assert_int_eq(httphead_add(&h, "Y", 1, big, HTTPHEAD_MAX_BYTES / 2), 0);
    httphead_reset(&h);
    free(big);
}
END_TEST

/* oauth2 rules: the token arrives at run time (inject_token_*), the source is described to the
 * token manager (policy_oauth_*), and what it attaches is released with the snapshot. */
static const char *token_vault =
    "{\"version\":1,\"secrets\":{"
    "\"T\":{\"oauth2\":{\"token_url\":\"https://Token.Example.com:8443/oauth/token?x=1\","
    "\"grant\":\"refresh_token\",\"client_id\":\"cid\",\"refresh_token\":\"RT\","
    "\"client_secret\":\"CS\",\"client_auth\":\"post\",\"scope\":\"a b\"}},"
    "\"RT\":{\"value\":\"CANARY-rt\"},\"CS\":{\"value\":\"CANARY-cs\"}},"
    "\"rules\":["
    "{\"host_pattern\":\"b.example.com\",\"secret\":\"T\",\"scheme\":\"bearer\"},"
    "{\"host_pattern\":\"u.example.com\",\"secret\":\"T\",\"scheme\":\"basic\","
    "\"username\":\"x\"},"
    "{\"host_pattern\":\"q.example.com\",\"secret\":\"T\",\"scheme\":\"query\","
    "\"name\":\"key\"}]}";

static int released;

static void release_cb(void *slot)
{
    ck_assert_ptr_eq(slot, &released);
    released++;
}

START_TEST(test_inject_token)
{
    char err[ERRSZ];
    struct policy *p = policy_parse(token_vault, strlen(token_vault), err, sizeof(err));
    struct inject_form forms[INJECT_MAX_FORMS];
    struct policy_oauth oi;
    struct http_head h;
    struct inject_token *t;

    ck_assert_msg(p != NULL, "%s", err);
    /* the static path refuses: there is no value to inject */
    httphead_init(&h);
    ck_assert_int_eq(httphead_set_request_line(&h, "GET", 3, "/p?key=old", 10, 1), 0);
    ck_assert_int_eq(inject_apply(&h, p, 0), -1);
    t = inject_token_apply(&h, p, 0, "tok en", 6);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(httphead_get(&h, "Authorization")->value, "Bearer tok en");
    ck_assert_uint_eq(inject_token_forms(t, forms), 1);
    ck_assert(forms[0].len == 6 && memcmp(forms[0].bytes, "tok en", 6) == 0);
    inject_token_free(&t);
    ck_assert_ptr_null(t);
    t = inject_token_apply(&h, p, 1, "tok", 3);
    ck_assert_str_eq(httphead_get(&h, "Authorization")->value, "Basic eDp0b2s="); /* x:tok */
    ck_assert_uint_eq(inject_token_forms(t, forms), 2);
    inject_token_free(&t);
    t = inject_token_apply(&h, p, 2, "a/b", 3);
    ck_assert_str_eq(h.target, "/p?key=a%2Fb");
    /* the raw token: its percent-encoding is one of the spellings the masker finds */
    ck_assert_uint_eq(inject_token_forms(t, forms), 1);
    inject_token_free(&t);
    httphead_reset(&h);
    /* the source as the token manager sees it */
    ck_assert_uint_eq(policy_oauth_count(p), 1);
    policy_oauth_info(p, 0, &oi);
    ck_assert_str_eq(oi.secret_name, "T");
    ck_assert_str_eq(oi.host, "token.example.com");
    ck_assert_int_eq(oi.port, 8443);
    ck_assert_str_eq(oi.target, "/oauth/token?x=1");
    ck_assert(oi.refresh_grant && oi.auth_post);
    ck_assert_str_eq(oi.scope, "a b");
    ck_assert_ptr_null(oi.audience);
    ck_assert(oi.client_secret_len == 9 && memcmp(oi.client_secret, "CANARY-cs", 9) == 0);
    ck_assert(oi.refresh_token_len == 9 && memcmp(oi.refresh_token, "CANARY-rt", 9) == 0);
    /* what the manager attaches goes with the last reference */
    released = 0;
    policy_oauth_attach(p, 0, &released, release_cb);
    ck_assert_ptr_eq(policy_oauth_slot(p, 0), &released);
    policy_unref(&p);
    ck_assert_int_eq(released, 1);
}
END_TEST

/* The forms of a value a rule's secret held earlier: as the current value's, any scheme. */
START_TEST(test_inject_token_make)
{
    struct policy *p = load();
    struct inject_form f[INJECT_MAX_FORMS];
    struct inject_token *t = inject_token_make(p, R_BASIC, "OLD-basic-0", 11);

    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(inject_token_forms(t, f), 2);
    ck_assert(has_form(f, 2, "OLD-basic-0"));
    ck_assert(has_form_flags(f, 2, "eC1hY2Nlc3MtdG9rZW46T0xELWJhc2ljLTA=", 0)); /* user:value */
    inject_token_free(&t);
    t = inject_token_make(p, R_QUERY, "OLD q", 5);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(inject_token_forms(t, f), 1);
    ck_assert(has_form(f, 1, "OLD q"));
    inject_token_free(&t);
    ck_assert_ptr_null(inject_token_make(p, 42, "x", 1));
    policy_unref(&p);
}
END_TEST

static char replaced[256];

static void note_replaced(const char *name, const char *value, size_t len, void *arg)
{
    (void)arg;
    snprintf(replaced + strlen(replaced), sizeof(replaced) - strlen(replaced), "%s=%.*s;", name,
             (int)len, value);
}

/* A reload retires the static values it changes or removes, and nothing else. */
START_TEST(test_inject_replaced_values)
{
    static const char *next =
        "{\"version\":1,\"secrets\":{"
        "\"B\":{\"value\":\"CANARY-bearer-1\"},"
        "\"U\":{\"value\":\"CANARY-basic-2\"},"
        "\"Q\":{\"value\":\"CANARY q/v+1~\"}},"
        "\"rules\":["
        "{\"host_pattern\":\"b.example.com\",\"secret\":\"B\",\"scheme\":\"bearer\"},"
        "{\"host_pattern\":\"u.example.com\",\"secret\":\"U\",\"scheme\":\"basic\","
        "\"username\":\"x-access-token\"},"
        "{\"host_pattern\":\"q.example.com\",\"secret\":\"Q\",\"scheme\":\"query\","
        "\"name\":\"key\"}]}";
    char err[ERRSZ];
    struct policy *a = load(), *b = policy_parse(next, strlen(next), err, sizeof(err));

    ck_assert_msg(b != NULL, "%s", err);
    replaced[0] = '\0';
    inject_replaced_values(a, b, note_replaced, NULL);
    /* U changed, H went; B and Q are the same */
    ck_assert_str_eq(replaced, "U=CANARY-basic-1;H=CANARY-header-1;");
    replaced[0] = '\0';
    inject_replaced_values(a, a, note_replaced, NULL);
    ck_assert_str_eq(replaced, "");
    policy_unref(&a);
    policy_unref(&b);
}
END_TEST

Suite *suite_inject(void);

Suite *suite_inject(void)
{
    Suite *s = suite_create("inject");
    TCase *tc = tcase_create("inject");

    tcase_add_loop_test(tc, test_inject_table, 0,
                        (int)(sizeof(inject_cases) / sizeof(inject_cases[0])));
    tcase_add_test(tc, test_inject_refusals);
    tcase_add_test(tc, test_inject_forms);
    tcase_add_test(tc, test_inject_token);
    tcase_add_test(tc, test_inject_token_make);
    tcase_add_test(tc, test_inject_replaced_values);
    tcase_add_test(tc, test_httphead_basics);
    tcase_add_test(tc, test_httphead_refused_bytes);
    tcase_add_test(tc, test_httphead_name_eq_bytes);
    tcase_add_test(tc, test_httphead_clear);
    tcase_add_test(tc, test_httphead_growth);
    tcase_add_test(tc, test_httphead_byte_cap);
    suite_add_tcase(s, tc);
    return s;
}
