/*
 * test_pct.c - the percent codec (common/pct.c): hex digits, one escape, decoding once with and
 * without '+' as a space, encoding with and without a space as '+'. Inputs end at a guard page,
 * so reading one byte past an escape at the end crashes.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/pct.h"
#include "tests/unit/guard.h"

struct pct_case {
    const char *in;
    size_t in_len; /* 0: strlen(in) */
    unsigned flags;
    const char *want;
    size_t want_len; /* 0: strlen(want) */
};

static const struct pct_case decode_cases[] = {
    {"", 0, 0, "", 0},
    {"plain", 0, 0, "plain", 0},
    {"%41%42c", 0, 0, "ABc", 0},
    {"%3a%3A", 0, 0, "::", 0},         /* either case */
    {"/a%3Ab%20c", 0, 0, "/a:b c", 0}, /* the scope test's path */
    {"%00x", 4, 0, "\0x", 2},          /* NUL decodes like any byte */
    {"%ff%FF", 0, 0, "\xff\xff", 0},
    {"%", 0, 0, "%", 0}, /* malformed escapes stay as they are */
    {"%4", 0, 0, "%4", 0},
    {"a%4", 0, 0, "a%4", 0},
    {"%4g", 0, 0, "%4g", 0},
    {"%g4", 0, 0, "%g4", 0},
    {"%%41", 0, 0, "%A", 0},   /* the first '%' is malformed, the second decodes */
    {"%2541", 0, 0, "%41", 0}, /* once only */
    {"a+b", 0, 0, "a+b", 0},   /* '+' is a space only when asked */
    {"a+b%2B", 0, PCT_PLUS_SPACE, "a b+", 0},
    {"+%20+", 0, PCT_PLUS_SPACE, "   ", 0},
};

static const struct pct_case encode_cases[] = {
    {"", 0, 0, "", 0},
    {"AZaz09-._~", 0, 0, "AZaz09-._~", 0}, /* unreserved */
    {"a b", 0, 0, "a%20b", 0},
    {"a b", 0, PCT_SPACE_PLUS, "a+b", 0},
    {"+&=%/?#", 0, PCT_SPACE_PLUS, "%2B%26%3D%25%2F%3F%23", 0},
    {"\x00\x7f\x80\xff", 4, 0, "%00%7F%80%FF", 0}, /* upper-case hex */
    {"sk-\xe2\x82\xac!", 0, 0, "sk-%E2%82%AC%21", 0},
};

static size_t len_of(const char *s, size_t n)
{
    return n != 0 ? n : strlen(s);
}

START_TEST(test_pct_decode_table)
{
    const struct pct_case *c = &decode_cases[_i];
    size_t n = len_of(c->in, c->in_len), want = len_of(c->want, c->want_len), got;
    char *in = guard_copy(c->in, n);
    char *out = malloc(n + 1);

    ck_assert_ptr_nonnull(out);
    got = pct_decode(out, in, n, c->flags);
    ck_assert_msg(got == want && memcmp(out, c->want, want) == 0, "decode case %d", _i);
    /* in place: out may be the input itself */
    memcpy(out, c->in, n);
    got = pct_decode(out, out, n, c->flags);
    ck_assert_msg(got == want && memcmp(out, c->want, want) == 0, "in-place case %d", _i);
    free(out);
    guard_free(in, n);
}
END_TEST

START_TEST(test_pct_encode_table)
{
    const struct pct_case *c = &encode_cases[_i];
    size_t n = len_of(c->in, c->in_len), want = strlen(c->want), got;
    char *in = guard_copy(c->in, n);
    char *out = malloc(PCT_ENCODED_MAX(n) + 1);

    ck_assert_ptr_nonnull(out);
    got = pct_encode(out, in, n, c->flags);
    ck_assert_msg(got <= PCT_ENCODED_MAX(n), "encode case %d wrote too much", _i);
    ck_assert_msg(got == want && memcmp(out, c->want, want) == 0, "encode case %d", _i);
    free(out);
    guard_free(in, n);
}
END_TEST

START_TEST(test_pct_hexval_and_escape)
{
    for (int c = 0; c < 256; c++) {
        int want = c >= '0' && c <= '9'   ? c - '0'
                   : c >= 'a' && c <= 'f' ? c - 'a' + 10
                   : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : -1;

        ck_assert_msg(pct_hexval((unsigned char)c) == want, "hexval 0x%02x", c);
    }
    ck_assert_int_eq(pct_escape("%2F", 3), '/');
    ck_assert_int_eq(pct_escape("%2f/", 4), '/');
    ck_assert_int_eq(pct_escape("%00", 3), 0);
    ck_assert_int_eq(pct_escape("%2F", 2), -1); /* the second digit is past n */
    ck_assert_int_eq(pct_escape("%", 1), -1);
    ck_assert_int_eq(pct_escape("", 0), -1);
    ck_assert_int_eq(pct_escape("x2F", 3), -1);
    ck_assert_int_eq(pct_escape("%2G", 3), -1);
    ck_assert_int_eq(pct_escape("%:0", 3), -1); /* ':' is after '9', '@' before 'A' */
    ck_assert_int_eq(pct_escape("%@0", 3), -1);
}
END_TEST

/* Every byte, under both flag pairs: decode(encode(x)) == x. */
START_TEST(test_pct_round_trip)
{
    char in[256], enc[PCT_ENCODED_MAX(256)], dec[PCT_ENCODED_MAX(256)];
    size_t n, m;

    for (int i = 0; i < 256; i++)
        in[i] = (char)i;
    n = pct_encode(enc, in, sizeof(in), 0);
    ck_assert_uint_eq(n, 66 + 190 * 3); /* 66 unreserved bytes */
    m = pct_decode(dec, enc, n, 0);
    ck_assert(m == sizeof(in) && memcmp(dec, in, m) == 0);
    n = pct_encode(enc, in, sizeof(in), PCT_SPACE_PLUS);
    m = pct_decode(dec, enc, n, PCT_PLUS_SPACE);
    ck_assert(m == sizeof(in) && memcmp(dec, in, m) == 0);
}
END_TEST

Suite *suite_pct(void);

Suite *suite_pct(void)
{
    Suite *s = suite_create("pct");
    TCase *tc = tcase_create("pct");

    tcase_add_loop_test(tc, test_pct_decode_table, 0,
                        (int)(sizeof(decode_cases) / sizeof(decode_cases[0])));
    tcase_add_loop_test(tc, test_pct_encode_table, 0,
                        (int)(sizeof(encode_cases) / sizeof(encode_cases[0])));
    tcase_add_test(tc, test_pct_hexval_and_escape);
    tcase_add_test(tc, test_pct_round_trip);
    suite_add_tcase(s, tc);
    return s;
}
