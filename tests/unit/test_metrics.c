/*
 * test_metrics.c - the counters and the /metrics text (proxy/metrics.c): values summed across
 * worker slots (an out-of-range worker included), label escaping and the bound on secret names,
 * histogram buckets cumulative and inclusive, HELP and TYPE for every family.
 */
#include "common/caps.h"
#include "proxy/metrics.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- metrics ---- */

static char *render(void)
{
    struct metrics_extra extra = {7, 3};
    size_t len = 0;
    char *text = metrics_render(&extra, &len);

    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

static void assert_line(const char *text, const char *line)
{
    char want[512];

    snprintf(want, sizeof(want), "\n%s\n", line);
    ck_assert_msg(strstr(text, want) != NULL, "missing line: %s\n---\n%s", line, text);
}

START_TEST(metrics_counters)
{
    char *text;

    ck_assert_int_eq(metrics_init(2), 0);
    ck_assert_int_eq(metrics_init(2), -1); /* once */
    for (int i = 0; i < 3; i++)
        metrics_request(0, METRICS_D_INJECT, 200, 0.01);
    metrics_request(1, METRICS_D_BLOCK, 403, 0.001);
    metrics_request(1, METRICS_D_BLOCK, 403, 0.001);
    metrics_request(-1, METRICS_D_ERROR, 400, 0.0);
    metrics_request(5, METRICS_D_ALLOW, 0, 1.0); /* no status: counted as 5xx */
    metrics_blocked(1);
    metrics_blocked(1);
    metrics_injection(0, "OPENAI_API_KEY");
    metrics_injection(1, "OPENAI_API_KEY");
    metrics_injection(1, "GITHUB_PAT");
    for (int i = 0; i < 3; i++)
        metrics_conn_open(i % 2);
    metrics_conn_close(1);
    metrics_tls_handshake(0);
    metrics_upstream_error(0, METRICS_UE_DNS);
    metrics_upstream_error(1, METRICS_UE_PROTOCOL);
    metrics_upstream_error(1, METRICS_UE_PROTOCOL);

    text = render();
    assert_line(text, "vaultgate_requests_total{decision=\"inject\",code_class=\"2xx\"} 3");
    assert_line(text, "vaultgate_requests_total{decision=\"block\",code_class=\"4xx\"} 2");
    assert_line(text, "vaultgate_requests_total{decision=\"error\",code_class=\"4xx\"} 1");
    assert_line(text, "vaultgate_requests_total{decision=\"allow\",code_class=\"5xx\"} 1");
    assert_line(text, "vaultgate_requests_total{decision=\"allow\",code_class=\"2xx\"} 0");
    assert_line(text, "vaultgate_blocked_total 2");
    assert_line(text, "vaultgate_injections_total{secret=\"OPENAI_API_KEY\"} 2");
    assert_line(text, "vaultgate_injections_total{secret=\"GITHUB_PAT\"} 1");
    assert_line(text, "vaultgate_connections_active 2");
    assert_line(text, "vaultgate_tls_handshakes_total 1");
    assert_line(text, "vaultgate_cert_cache_hits_total 7");
    assert_line(text, "vaultgate_cert_cache_misses_total 3");
    assert_line(text, "vaultgate_upstream_errors_total{kind=\"dns\"} 1");
    assert_line(text, "vaultgate_upstream_errors_total{kind=\"protocol\"} 2");
    assert_line(text, "vaultgate_upstream_errors_total{kind=\"timeout\"} 0");
    /* Every family has HELP and TYPE. */
    assert_line(text, "# TYPE vaultgate_requests_total counter");
    assert_line(text, "# TYPE vaultgate_connections_active gauge");
    assert_line(text, "# TYPE vaultgate_request_duration_seconds histogram");
    ck_assert_ptr_nonnull(strstr(text, "# HELP vaultgate_blocked_total "));
    ck_assert(strncmp(text, "# HELP vaultgate_requests_total ", 32) == 0);
    free(text);
    metrics_shutdown();
    ck_assert_ptr_null(metrics_render(NULL, NULL));
}
END_TEST

/* Reloads are counted by result, by signal or by watch alike (the main thread's counters). */
START_TEST(metrics_reloads)
{
    char *text;

    ck_assert_int_eq(metrics_init(1), 0);
    text = render();
    assert_line(text, "# TYPE vaultgate_vault_reloads_total counter");
    assert_line(text, "vaultgate_vault_reloads_total{result=\"ok\"} 0");
    free(text);
    metrics_reload(METRICS_R_OK);
    metrics_reload(METRICS_R_OK);
    metrics_reload(METRICS_R_INVALID);
    metrics_reload(METRICS_R_RELAUNCH);
    metrics_reload(METRICS_R_COUNT); /* out of range: ignored */
    text = render();
    assert_line(text, "vaultgate_vault_reloads_total{result=\"ok\"} 2");
    assert_line(text, "vaultgate_vault_reloads_total{result=\"invalid\"} 1");
    assert_line(text, "vaultgate_vault_reloads_total{result=\"relaunch\"} 1");
    free(text);
    metrics_shutdown();
}
END_TEST

START_TEST(metrics_label_escaping)
{
    char *text, name[80];

    ck_assert_int_eq(metrics_init(1), 0);
    metrics_injection(0, "A\"B\\C\nD");
    /* Past the label table's bound names count under "(other)"; nothing is lost. */
    for (int i = 0; i < VG_METRICS_MAX_SECRETS + 5; i++) {
        snprintf(name, sizeof(name), "S%d", i);
        metrics_injection(0, name);
    }
    text = render();
    assert_line(text, "vaultgate_injections_total{secret=\"A\\\"B\\\\C\\nD\"} 1");
    assert_line(text, "vaultgate_injections_total{secret=\"S0\"} 1");
    assert_line(text, "vaultgate_injections_total{secret=\"(other)\"} 6");
    free(text);
    metrics_shutdown();
}
END_TEST

START_TEST(metrics_histogram)
{
    static const double secs[] = {0.001, 0.005, 0.02, 0.3, 42, 700, -1, 1.0 / 0.0};
    unsigned long long prev = 0, v, count = 0;
    char *text, *p;
    int buckets = 0;

    ck_assert_int_eq(metrics_init(1), 0);
    for (size_t i = 0; i < sizeof(secs) / sizeof(secs[0]); i++)
        metrics_request(0, METRICS_D_ALLOW, 200, secs[i]);
    text = render();
    /* le is an inclusive upper bound; -1 counts as 0, infinity lands in +Inf only */
    assert_line(text, "vaultgate_request_duration_seconds_bucket{le=\"0.005\"} 3");
    assert_line(text, "vaultgate_request_duration_seconds_bucket{le=\"0.01\"} 3");
    assert_line(text, "vaultgate_request_duration_seconds_bucket{le=\"0.025\"} 4");
    assert_line(text, "vaultgate_request_duration_seconds_bucket{le=\"0.5\"} 5");
    assert_line(text, "vaultgate_request_duration_seconds_bucket{le=\"60\"} 6");
    assert_line(text, "vaultgate_request_duration_seconds_bucket{le=\"600\"} 6");
    assert_line(text, "vaultgate_request_duration_seconds_bucket{le=\"+Inf\"} 8");
    assert_line(text, "vaultgate_request_duration_seconds_count 8");
    /* Cumulative: never decreasing, in order. */
    for (p = text; (p = strstr(p, "vaultgate_request_duration_seconds_bucket{")) != NULL; p++) {
        ck_assert_int_eq(sscanf(strchr(p, '}') + 1, " %llu", &v), 1);
        ck_assert_uint_ge(v, prev);
        prev = v;
        buckets++;
    }
    ck_assert_int_eq(buckets, 17);
    p = strstr(text, "vaultgate_request_duration_seconds_sum ");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p, "vaultgate_request_duration_seconds_sum %llu", &count), 1);
    /* 0.001 + 0.005 + 0.02 + 0.3 + 42 + 700, plus infinity clamped to 10^6 */
    ck_assert_uint_eq(count, 1000742);
    free(text);
    metrics_shutdown();
}
END_TEST

Suite *suite_metrics(void);
Suite *suite_metrics(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");

    tcase_add_test(tc, metrics_counters);
    tcase_add_test(tc, metrics_reloads);
    tcase_add_test(tc, metrics_label_escaping);
    tcase_add_test(tc, metrics_histogram);
    suite_add_tcase(s, tc);
    return s;
}
