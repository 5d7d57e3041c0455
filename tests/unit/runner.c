/*
 * runner.c - runs every module's Check suite and prints one closing line with the totals.
 *
 * CK_RUN_SUITE / CK_RUN_CASE (Check's own variables) pick a single suite or case.
 *
 * A test's time limit only catches a hang: Check's default of 4 s (from fork to end) is passed by
 * a sanitizer build on a loaded machine, so a case without its own limit gets 60 s here
 * (CK_DEFAULT_TIMEOUT, when not set by the caller).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "proxy/evmem.h"

#define SUITE(name) Suite *suite_##name(void);
#include "tests/unit/suites.def"
#undef SUITE

int main(void)
{
    SRunner *sr;
    int run, failed;

    (void)evmem_install_ssl(); /* before OpenSSL's first allocation, as vaultgate's main */
    setenv("CK_DEFAULT_TIMEOUT", "60", 0); /* read by tcase_create, below */
    sr = srunner_create(NULL);

#define SUITE(name) srunner_add_suite(sr, suite_##name());
#include "tests/unit/suites.def"
#undef SUITE
    srunner_run_all(sr, CK_NORMAL);
    run = srunner_ntests_run(sr);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    printf("unit: %d passed, %d failed\n", run - failed, failed);
    return failed == 0 && run > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
