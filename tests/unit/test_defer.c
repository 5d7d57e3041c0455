/*
 * test_defer.c - the deferred free (common/defer.h): a teardown inside nested callbacks frees at
 * the outermost return, one outside any callback frees at once, and nothing frees without one.
 */
#include <check.h>

#include "common/defer.h"

START_TEST(test_defer_outside_callbacks)
{
    struct defer d = {0};

    ck_assert(!defer_freed(&d));
    ck_assert(defer_free(&d)); /* no callback on the stack: free now */
    ck_assert(defer_freed(&d));
}
END_TEST

START_TEST(test_defer_nested)
{
    struct defer d = {0};

    defer_enter(&d);
    defer_enter(&d);
    ck_assert(!defer_free(&d)); /* inside two callbacks: wait */
    ck_assert(defer_freed(&d));
    ck_assert(!defer_free(&d));  /* a second teardown changes nothing */
    ck_assert(!defer_leave(&d)); /* the inner one returns */
    ck_assert(defer_leave(&d));  /* the outer one returns: free now */
}
END_TEST

START_TEST(test_defer_no_teardown)
{
    struct defer d = {0};

    for (int i = 0; i < 3; i++) {
        defer_enter(&d);
        defer_enter(&d);
        ck_assert(!defer_leave(&d));
        ck_assert(!defer_leave(&d)); /* depth 0, but nobody asked for a free */
    }
    ck_assert(!defer_freed(&d));
}
END_TEST

Suite *suite_defer(void);

Suite *suite_defer(void)
{
    Suite *s = suite_create("defer");
    TCase *tc = tcase_create("defer");

    tcase_add_test(tc, test_defer_outside_callbacks);
    tcase_add_test(tc, test_defer_nested);
    tcase_add_test(tc, test_defer_no_teardown);
    suite_add_tcase(s, tc);
    return s;
}
