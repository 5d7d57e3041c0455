/*
 * test_sechist.c - suite `sechist`: the registry of values a secret held (common/sechist.c):
 * values kept per name until cleared, the same value kept once, copies handed out, lifetimes
 * counted, the generation bumped only by a new value.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/sechist.h"

START_TEST(test_retire_and_get)
{
    struct sechist_vals *v = (struct sechist_vals *)1;
    uint64_t g0;
    size_t len;

    sechist_clear();
    ck_assert_int_eq(sechist_get("TOKEN", &v), 0);
    ck_assert_ptr_null(v);
    g0 = sechist_gen();
    ck_assert_int_eq(sechist_retire("TOKEN", "first-value", 11, 0), 0);
    ck_assert_int_eq(sechist_retire("TOKEN", "second\0value", 12, 0), 0); /* by length */
    ck_assert_int_eq(sechist_retire("TOKEN", "first-value", 11, 0), 0);   /* kept once */
    ck_assert_int_eq(sechist_retire("OTHER", "other-value", 11, 0), 0);
    ck_assert_uint_eq(sechist_gen(), g0 + 3);
    ck_assert_int_eq(sechist_get("TOKEN", &v), 0);
    ck_assert_uint_eq(sechist_vals_count(v), 2);
    ck_assert(memcmp(sechist_vals_at(v, 0, &len), "first-value", 11) == 0 && len == 11);
    ck_assert(memcmp(sechist_vals_at(v, 1, &len), "second\0value", 12) == 0 && len == 12);
    sechist_vals_free(&v);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(sechist_get("TOKE", &v), 0); /* names match whole */
    ck_assert_ptr_null(v);
    /* nothing to record: no value */
    ck_assert_int_eq(sechist_retire("TOKEN", "", 0, 0), 0);
    ck_assert_int_eq(sechist_retire(NULL, "x", 1, 0), 0);
    sechist_clear();
    ck_assert_int_eq(sechist_get("TOKEN", &v), 0);
    ck_assert_ptr_null(v);
}
END_TEST

START_TEST(test_live)
{
    sechist_clear();
    ck_assert_uint_eq(sechist_live("T", 1000), 0);
    ck_assert_int_eq(sechist_retire("T", "a-token", 7, 2000), 0);
    ck_assert_int_eq(sechist_retire("T", "b-token", 7, 5000), 0);
    ck_assert_int_eq(sechist_retire("T", "static", 6, 0), 0); /* never expires */
    ck_assert_uint_eq(sechist_live("T", 1000), 3);
    ck_assert_uint_eq(sechist_live("T", 2000), 2); /* expired at its time */
    ck_assert_uint_eq(sechist_live("T", 9000), 1);
    ck_assert_uint_eq(sechist_live("U", 0), 0);
    sechist_clear();
}
END_TEST

START_TEST(test_many)
{
    char buf[32];
    struct sechist_vals *v = NULL;
    size_t len;

    sechist_clear();
    for (int i = 0; i < 100; i++) {
        int n = snprintf(buf, sizeof(buf), "value-%03d", i);

        ck_assert_int_eq(sechist_retire("MANY", buf, (size_t)n, 0), 0);
    }
    ck_assert_int_eq(sechist_get("MANY", &v), 0);
    ck_assert_uint_eq(sechist_vals_count(v), 100);
    ck_assert(memcmp(sechist_vals_at(v, 99, &len), "value-099", 9) == 0);
    sechist_vals_free(&v);
    sechist_clear();
}
END_TEST

Suite *suite_sechist(void);

Suite *suite_sechist(void)
{
    Suite *s = suite_create("sechist");
    TCase *tc = tcase_create("registry");

    tcase_add_test(tc, test_retire_and_get);
    tcase_add_test(tc, test_live);
    tcase_add_test(tc, test_many);
    suite_add_tcase(s, tc);
    return s;
}
