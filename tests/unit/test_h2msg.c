/*
 * test_h2msg.c - HTTP/2 request field sections against RFC 9113 §8 and SPEC §4 (http/h2msg.c):
 * every refusal with its kind (stream reset or HTTP answer) and status, the head a good request
 * becomes for the exchange (method, target, Host from :authority, cookie crumbs joined, body
 * framing), content-length against DATA, request trailers, and response heads turned into
 * nghttp2 name/value lists.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/caps.h"
#include "http/h2msg.h"

struct nv {
    const char *name, *value;
};

#define GET   ":method", "GET"
#define HTTPS ":scheme", "https"
#define AUTH  ":authority", "api.example.test"
#define ROOT  ":path", "/v1/x?q=1"

struct req_case {
    const char *what;
    struct nv f[8];
    bool end_stream;
    enum h2req_verdict verdict;
    int status;
};

static const struct req_case cases[] = {
    {"a plain GET", {{GET}, {HTTPS}, {AUTH}, {ROOT}}, true, H2REQ_OK, 0},
    {"OPTIONS *", {{":method", "OPTIONS"}, {HTTPS}, {AUTH}, {":path", "*"}}, true, H2REQ_OK, 0},
    {"host alone", {{GET}, {HTTPS}, {ROOT}, {"host", "api.example.test"}}, true, H2REQ_OK, 0},
    {"host agreeing",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"host", "API.example.test"}},
     true,
     H2REQ_OK,
     0},
    {"te trailers", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"te", "trailers"}}, true, H2REQ_OK, 0},
    /* malformed: the stream is reset */
    {"no :method", {{HTTPS}, {AUTH}, {ROOT}}, true, H2REQ_MALFORMED, 0},
    {"no :path", {{GET}, {HTTPS}, {AUTH}}, true, H2REQ_MALFORMED, 0},
    {"no :scheme", {{GET}, {AUTH}, {ROOT}}, true, H2REQ_MALFORMED, 0},
    {"pseudo after regular",
     {{GET}, {HTTPS}, {"accept", "*/*"}, {AUTH}, {ROOT}},
     true,
     H2REQ_MALFORMED,
     0},
    {"pseudo twice", {{GET}, {GET}, {HTTPS}, {AUTH}, {ROOT}}, true, H2REQ_MALFORMED, 0},
    {"unknown pseudo",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {":status", "200"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"upper-case name",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"Accept", "*/*"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"connection field",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"connection", "close"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"transfer-encoding",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"transfer-encoding", "chunked"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"upgrade",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"upgrade", "websocket"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"keep-alive", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"keep-alive", "1"}}, true, H2REQ_MALFORMED, 0},
    {"proxy-connection",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"proxy-connection", "x"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"te gzip", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"te", "gzip"}}, true, H2REQ_MALFORMED, 0},
    {"LF in a value", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"x-a", "a\nb"}}, true, H2REQ_MALFORMED, 0},
    {"leading space", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"x-a", " a"}}, true, H2REQ_MALFORMED, 0},
    {"trailing tab", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"x-a", "a\t"}}, true, H2REQ_MALFORMED, 0},
    {"empty name", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"", "a"}}, true, H2REQ_MALFORMED, 0},
    {"space in :method", {{":method", "G T"}, {HTTPS}, {AUTH}, {ROOT}}, true, H2REQ_MALFORMED, 0},
    {":protocol without CONNECT",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {":protocol", "websocket"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"CONNECT with :path", {{":method", "CONNECT"}, {AUTH}, {ROOT}}, true, H2REQ_MALFORMED, 0},
    {"content-length twice, differing",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"content-length", "1"}, {"content-length", "2"}},
     false,
     H2REQ_MALFORMED,
     0},
    {"content-length, no DATA",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"content-length", "3"}},
     true,
     H2REQ_MALFORMED,
     0},
    {"CONNECT", {{":method", "CONNECT"}, {AUTH}}, true, H2REQ_OK, 0}, /* the exchange: 405 */
    /* answered */
    {"extended CONNECT",
     {{":method", "CONNECT"}, {":protocol", "websocket"}, {HTTPS}, {AUTH}, {ROOT}},
     true,
     H2REQ_ANSWER,
     405},
    {"scheme http", {{GET}, {":scheme", "http"}, {AUTH}, {ROOT}}, true, H2REQ_ANSWER, 400},
    {"absolute :path",
     {{GET}, {HTTPS}, {AUTH}, {":path", "https://a.test/"}},
     true,
     H2REQ_ANSWER,
     400},
    {"* for GET", {{GET}, {HTTPS}, {AUTH}, {":path", "*"}}, true, H2REQ_ANSWER, 400},
    {"no authority", {{GET}, {HTTPS}, {ROOT}}, true, H2REQ_ANSWER, 400},
    {"host differs",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"host", "other.test"}},
     true,
     H2REQ_ANSWER,
     400},
    /* one host field at most, as in HTTP/1.1: else the last one would have named the host */
    {"two host fields",
     {{GET}, {HTTPS}, {ROOT}, {"host", "other.test"}, {"host", "api.example.test"}},
     true,
     H2REQ_ANSWER,
     400},
    {"two host fields agreeing",
     {{GET}, {HTTPS}, {ROOT}, {"host", "api.example.test"}, {"host", "api.example.test"}},
     true,
     H2REQ_ANSWER,
     400},
    {"two host fields beside :authority",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"host", "api.example.test"}, {"host", "api.example.test"}},
     true,
     H2REQ_ANSWER,
     400},
    {"underscore name",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"x_forwarded", "1"}},
     true,
     H2REQ_ANSWER,
     400},
    {"control byte", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"x-a", "a\x01"}}, true, H2REQ_ANSWER, 400},
    {"DEL byte", {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"x-a", "a\x7f"}}, true, H2REQ_ANSWER, 400},
    {"content-length sign",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"content-length", "+1"}},
     false,
     H2REQ_ANSWER,
     400},
    {"content-length leading zero",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"content-length", "01"}},
     false,
     H2REQ_ANSWER,
     400},
    {"content-length 17 digits",
     {{GET}, {HTTPS}, {AUTH}, {ROOT}, {"content-length", "10000000000000000"}},
     false,
     H2REQ_ANSWER,
     400},
    {"space in :authority",
     {{GET}, {HTTPS}, {":authority", "a b"}, {ROOT}},
     true,
     H2REQ_ANSWER,
     400},
};

static enum h2req_verdict run_case(const struct req_case *c, struct h2req *r)
{
    h2req_init(r);
    for (size_t i = 0; i < 8 && c->f[i].name != NULL; i++)
        h2req_field(r, (const uint8_t *)c->f[i].name, strlen(c->f[i].name),
                    (const uint8_t *)c->f[i].value, strlen(c->f[i].value));
    return h2req_finish(r, c->end_stream);
}

START_TEST(test_request_rules)
{
    const struct req_case *c = &cases[_i];
    struct h2req r;
    enum h2req_verdict v = run_case(c, &r);

    ck_assert_msg(v == c->verdict, "%s: verdict %d, want %d (%s)", c->what, v, c->verdict,
                  r.why != NULL ? r.why : "-");
    if (v == H2REQ_ANSWER)
        ck_assert_msg(r.status == c->status, "%s: status %d, want %d", c->what, r.status,
                      c->status);
    if (v != H2REQ_OK)
        ck_assert_msg(r.why != NULL && r.why[0] != '\0', "%s: no reason", c->what);
    h2req_free(&r);
}
END_TEST

static void add(struct h2req *r, const char *n, const char *v)
{
    h2req_field(r, (const uint8_t *)n, strlen(n), (const uint8_t *)v, strlen(v));
}

/* A request's pseudo-header fields for a.test, method given. */
static void start(struct h2req *r, const char *method)
{
    h2req_init(r);
    add(r, ":method", method);
    add(r, ":scheme", "https");
    add(r, ":authority", "a.test");
    add(r, ":path", "/");
}

static const char *field(const struct http_head *h, const char *name, size_t *len)
{
    const struct http_field *f = httphead_get(h, name);

    if (f == NULL)
        return NULL;
    *len = f->value_len;
    return f->value;
}

/* The head for the exchange: request line from the pseudo-headers, Host first among fields,
 * regular fields in order, cookie crumbs joined with "; ", te dropped. */
START_TEST(test_head_for_exchange)
{
    struct h2req r;
    const struct http_head *h = &r.msg.head;
    const char *v;
    size_t len;

    h2req_init(&r);
    add(&r, ":method", "POST");
    add(&r, ":scheme", "https");
    add(&r, ":authority", "api.example.test");
    add(&r, ":path", "/v1/chat?x=1");
    add(&r, "cookie", "a=1");
    add(&r, "accept", "*/*");
    add(&r, "cookie", "b=2");
    add(&r, "te", "trailers");
    add(&r, "content-length", "5");
    ck_assert_int_eq(h2req_finish(&r, false), H2REQ_OK);
    ck_assert_str_eq(h->method, "POST");
    ck_assert_uint_eq(h->target_len, 12);
    ck_assert_int_eq(memcmp(h->target, "/v1/chat?x=1", 12), 0);
    v = field(h, "Host", &len);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(len == 16 && memcmp(v, "api.example.test", 16) == 0, 1);
    v = field(h, "cookie", &len);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(len == 8 && memcmp(v, "a=1; b=2", 8) == 0, 1);
    ck_assert_ptr_null(httphead_get(h, "te"));
    ck_assert_ptr_nonnull(httphead_get(h, "accept"));
    ck_assert_int_eq(r.msg.body, HTTP1_BODY_LENGTH);
    ck_assert_uint_eq(r.msg.content_length, 5);
    /* DATA against content-length */
    ck_assert_int_eq(h2req_data(&r, 2, false), 0);
    ck_assert_int_eq(h2req_data(&r, 3, true), 0);
    h2req_free(&r);
}
END_TEST

/* The :path's buffer outlives h2req_clear, wiped, for the stream's next request: a path that
 * fits reuses it, a longer one replaces it, one past VG_H2_PATH_KEEP is freed at the clear. */
START_TEST(test_path_buffer_kept)
{
    struct h2req r;
    static char longp[VG_H2_PATH_KEEP + 2];
    char *buf;

    start(&r, "GET");
    h2req_clear(&r);
    add(&r, ":method", "GET");
    add(&r, ":scheme", "https");
    add(&r, ":authority", "a.test");
    add(&r, ":path", "/secret-ish/path");
    ck_assert_int_eq(h2req_finish(&r, true), H2REQ_OK);
    buf = r.path_buf;
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(r.path_cap, 16);
    h2req_clear(&r);
    ck_assert_ptr_eq(r.path_buf, buf); /* kept */
    ck_assert_ptr_null(r.path);
    for (size_t i = 0; i < 16; i++)
        ck_assert_int_eq(buf[i], 0); /* wiped */
    add(&r, ":method", "GET");
    add(&r, ":scheme", "https");
    add(&r, ":authority", "a.test");
    add(&r, ":path", "/short");
    ck_assert_int_eq(h2req_finish(&r, true), H2REQ_OK);
    ck_assert_ptr_eq(r.path, buf); /* reused, no allocation */
    ck_assert_int_eq(memcmp(r.msg.head.target, "/short", 6), 0);
    h2req_clear(&r);
    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    add(&r, ":method", "GET");
    add(&r, ":scheme", "https");
    add(&r, ":authority", "a.test");
    add(&r, ":path", longp);
    ck_assert_int_eq(h2req_finish(&r, true), H2REQ_OK);
    ck_assert_uint_eq(r.path_cap, VG_H2_PATH_KEEP + 1);
    h2req_clear(&r);
    ck_assert_ptr_null(r.path_buf); /* past the bound: freed */
    ck_assert_uint_eq(r.path_cap, 0);
    h2req_free(&r);
}
END_TEST

START_TEST(test_body_framing)
{
    struct h2req r;

    start(&r, "POST");
    ck_assert_int_eq(h2req_finish(&r, false), H2REQ_OK);
    ck_assert_int_eq(r.msg.body, HTTP1_BODY_CHUNKED); /* unknown length */
    ck_assert_int_eq(h2req_data(&r, 1 << 20, true), 0);
    h2req_free(&r);

    start(&r, "GET");
    ck_assert_int_eq(h2req_finish(&r, true), H2REQ_OK);
    ck_assert_int_eq(r.msg.body, HTTP1_BODY_NONE);
    h2req_free(&r);
}
END_TEST

START_TEST(test_data_against_content_length)
{
    struct h2req r;

    start(&r, "PUT");
    add(&r, "content-length", "4");
    ck_assert_int_eq(h2req_finish(&r, false), H2REQ_OK);
    ck_assert_int_eq(h2req_data(&r, 3, false), 0);
    ck_assert_int_eq(h2req_data(&r, 0, true), -1); /* ends one byte short */
    h2req_free(&r);

    start(&r, "PUT");
    add(&r, "content-length", "4");
    ck_assert_int_eq(h2req_finish(&r, false), H2REQ_OK);
    ck_assert_int_eq(h2req_data(&r, 5, false), -1); /* more than announced */
    h2req_free(&r);
}
END_TEST

/* SPEC §4's caps: 100 fields, 64 KiB; 431, and nothing after the first refusal counts. */
START_TEST(test_caps)
{
    struct h2req r;
    char name[16];
    static char big[VG_HEAD_MAX_BYTES];

    start(&r, "GET");
    for (int i = 0; i < VG_HEAD_MAX_FIELDS; i++) {
        snprintf(name, sizeof(name), "x-%d", i);
        add(&r, name, "v");
    }
    ck_assert_int_eq(h2req_finish(&r, true), H2REQ_ANSWER);
    ck_assert_int_eq(r.status, 431);
    h2req_free(&r);

    memset(big, 'a', sizeof(big) - 1);
    start(&r, "GET");
    add(&r, "x-big", big);
    add(&r, "connection", "close"); /* after the refusal: ignored, the 431 stands */
    ck_assert_int_eq(h2req_finish(&r, true), H2REQ_ANSWER);
    ck_assert_int_eq(r.status, 431);
    h2req_free(&r);
}
END_TEST

START_TEST(test_trailer_fields)
{
    ck_assert_int_eq(h2req_trailer_field((const uint8_t *)"x-sum", 5, (const uint8_t *)"1", 1), 0);
    ck_assert_int_eq(h2req_trailer_field((const uint8_t *)":path", 5, (const uint8_t *)"/", 1), -1);
    ck_assert_int_eq(
        h2req_trailer_field((const uint8_t *)"connection", 10, (const uint8_t *)"x", 1), -1);
    ck_assert_int_eq(h2req_trailer_field((const uint8_t *)"X-Sum", 5, (const uint8_t *)"1", 1), -1);
    ck_assert_int_eq(h2req_trailer_field((const uint8_t *)"x-a", 3, (const uint8_t *)"a\r", 2), -1);
}
END_TEST

static bool nv_is(const nghttp2_nv *nv, const char *name, const char *value)
{
    return nv->namelen == strlen(name) && memcmp(nv->name, name, nv->namelen) == 0 &&
           nv->valuelen == strlen(value) && memcmp(nv->value, value, nv->valuelen) == 0;
}

/* Response heads: :status first, names lower-cased, HTTP/1.1 framing and connection fields
 * dropped, content-length from the known length; trailers without :status; too small → -1. */
START_TEST(test_response_nv)
{
    struct http_head h;
    nghttp2_nv nv[8];
    char buf[256];
    int n;

    httphead_init(&h);
    ck_assert_int_eq(httphead_set_status_line(&h, 1, 200, "OK", 2), 0);
    ck_assert_int_eq(httphead_add(&h, "Content-Type", 12, "text/plain", 10), 0);
    ck_assert_int_eq(httphead_add(&h, "Connection", 10, "keep-alive", 10), 0);
    ck_assert_int_eq(httphead_add(&h, "Transfer-Encoding", 17, "chunked", 7), 0);
    ck_assert_int_eq(httphead_add(&h, "Content-Length", 14, "99", 2), 0);
    ck_assert_int_eq(httphead_add(&h, "Keep-Alive", 10, "timeout=5", 9), 0);
    ck_assert_int_eq(httphead_add(&h, "X-Req", 5, "abc", 3), 0);
    n = h2msg_nv(&h, 200, true, 12, nv, 8, buf, sizeof(buf));
    ck_assert_int_eq(n, 4);
    ck_assert(nv_is(&nv[0], ":status", "200"));
    ck_assert(nv_is(&nv[1], "content-type", "text/plain"));
    ck_assert(nv_is(&nv[2], "x-req", "abc"));
    ck_assert(nv_is(&nv[3], "content-length", "12"));
    n = h2msg_nv(&h, -1, false, 0, nv, 8, buf, sizeof(buf));
    ck_assert_int_eq(n, 2);
    ck_assert(nv_is(&nv[0], "content-type", "text/plain"));
    ck_assert_int_eq(h2msg_nv(&h, 200, true, 12, nv, 2, buf, sizeof(buf)), -1);
    ck_assert_int_eq(h2msg_nv(&h, 200, false, 0, nv, 8, buf, 16), -1);
    httphead_reset(&h);
}
END_TEST

Suite *suite_h2msg(void);

Suite *suite_h2msg(void)
{
    Suite *s = suite_create("h2msg");
    TCase *tc = tcase_create("fields");

    tcase_add_loop_test(tc, test_request_rules, 0, sizeof(cases) / sizeof(cases[0]));
    tcase_add_test(tc, test_head_for_exchange);
    tcase_add_test(tc, test_path_buffer_kept);
    tcase_add_test(tc, test_body_framing);
    tcase_add_test(tc, test_data_against_content_length);
    tcase_add_test(tc, test_caps);
    tcase_add_test(tc, test_trailer_fields);
    tcase_add_test(tc, test_response_nv);
    suite_add_tcase(s, tc);
    return s;
}
