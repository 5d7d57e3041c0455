/*
 * test_wbuf.c - the wiping growable buffer (common/wbuf.c): appends across growth, the NUL after
 * the bytes, percent-encoded and -decoded appends, sticky failure, and an empty buffer that
 * allocates nothing.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/pct.h"
#include "common/wbuf.h"

START_TEST(test_wbuf_append_and_grow)
{
    struct wbuf b = {0};
    char want[1000];

    for (size_t i = 0; i < sizeof(want); i++) {
        want[i] = (char)('a' + i % 26);
        wbuf_char(&b, want[i]);
        ck_assert_uint_eq(b.len, i + 1);
        ck_assert(b.cap > b.len);
        ck_assert_int_eq(b.p[b.len], '\0');
    }
    ck_assert(!b.fail);
    ck_assert(memcmp(b.p, want, sizeof(want)) == 0);
    wbuf_str(&b, "|end");
    wbuf_add(&b, "\0z", 2); /* bytes, not a string */
    ck_assert_uint_eq(b.len, sizeof(want) + 6);
    ck_assert(memcmp(b.p + sizeof(want), "|end\0z", 6) == 0);
    wbuf_free(&b);
    ck_assert_ptr_null(b.p);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    ck_assert(!b.fail);
    wbuf_free(&b); /* twice is harmless */
}
END_TEST

struct wbuf_pct_case {
    const char *in;
    int encode; /* 1 encode, 0 decode */
    unsigned flags;
    const char *want;
};

static const struct wbuf_pct_case pct_cases[] = {
    {"a b&c", 1, 0, "pre:a%20b%26c"},
    {"a b&c", 1, PCT_SPACE_PLUS, "pre:a+b%26c"},
    {"a+b%2Fc%4", 0, 0, "pre:a+b/c%4"},
    {"a+b%2Fc%4", 0, PCT_PLUS_SPACE, "pre:a b/c%4"},
};

START_TEST(test_wbuf_pct_table)
{
    const struct wbuf_pct_case *c = &pct_cases[_i];
    struct wbuf b = {0};

    wbuf_str(&b, "pre:");
    if (c->encode)
        wbuf_pct_encode(&b, c->in, strlen(c->in), c->flags);
    else
        wbuf_pct_decode(&b, c->in, strlen(c->in), c->flags);
    ck_assert(!b.fail);
    ck_assert_str_eq(b.p, c->want);
    ck_assert_uint_eq(b.len, strlen(c->want));
    wbuf_free(&b);
}
END_TEST

/* Appending nothing by the codec allocates nothing: a caller may test p for "was anything
 * written". Appending nothing by wbuf_add gives an empty string. */
START_TEST(test_wbuf_empty)
{
    struct wbuf b = {0};

    wbuf_pct_encode(&b, "", 0, 0);
    wbuf_pct_decode(&b, "", 0, PCT_PLUS_SPACE);
    ck_assert_ptr_null(b.p);
    ck_assert(!b.fail);
    wbuf_add(&b, "", 0);
    ck_assert_ptr_nonnull(b.p);
    ck_assert_str_eq(b.p, "");
    wbuf_free(&b);
}
END_TEST

START_TEST(test_wbuf_fail_is_sticky)
{
    struct wbuf b = {0};

    wbuf_str(&b, "kept");
    wbuf_add(&b, "x", SIZE_MAX); /* cannot fit: fails without reading */
    ck_assert(b.fail);
    ck_assert_uint_eq(b.len, 4);
    wbuf_str(&b, "more");
    wbuf_pct_encode(&b, "x y", 3, 0);
    wbuf_pct_decode(&b, "%41", 3, 0);
    ck_assert_uint_eq(b.len, 4);
    ck_assert_str_eq(b.p, "kept");
    wbuf_free(&b);
    ck_assert(!b.fail); /* free readies it for reuse */

    wbuf_pct_encode(&b, "x", SIZE_MAX / 3 + 1, 0); /* 3n would overflow */
    ck_assert(b.fail);
    ck_assert_ptr_null(b.p);
    wbuf_free(&b);
}
END_TEST

Suite *suite_wbuf(void);

Suite *suite_wbuf(void)
{
    Suite *s = suite_create("wbuf");
    TCase *tc = tcase_create("wbuf");

    tcase_add_test(tc, test_wbuf_append_and_grow);
    tcase_add_loop_test(tc, test_wbuf_pct_table, 0,
                        (int)(sizeof(pct_cases) / sizeof(pct_cases[0])));
    tcase_add_test(tc, test_wbuf_empty);
    tcase_add_test(tc, test_wbuf_fail_is_sticky);
    suite_add_tcase(s, tc);
    return s;
}
