/*
 * test_log.c - the event log's line format (audit/log.c): one JSON line per event on stderr,
 * fields in their fixed order, strings escaped, numbers and the duration as printf would print
 * them, the time stamp in the one format of common/timefmt.h, free text redacted.
 *
 * stderr is redirected to a pipe inside each (forked) case.
 */
#include <check.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/log.h"

/* Runs one log_event with stderr on a pipe; returns the bytes written (NUL-terminated). */
static char *capture(enum log_level level, const char *event, const struct log_fields *f)
{
    static char buf[8192];
    int p[2], saved;
    ssize_t n;

    ck_assert_int_eq(pipe(p), 0);
    saved = dup(STDERR_FILENO);
    dup2(p[1], STDERR_FILENO);
    log_event(level, event, f);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    n = read(p[0], buf, sizeof(buf) - 1);
    close(p[0]);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* The line after its time stamp, which is checked against the format and cut off. */
static const char *after_time(const char *line)
{
    regex_t re;
    regmatch_t m;

    ck_assert_int_eq(regcomp(&re,
                             "^\\{\"time\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                             "\\.[0-9]{3}Z\"",
                             REG_EXTENDED),
                     0);
    ck_assert_msg(regexec(&re, line, 1, &m, 0) == 0, "time stamp: %.40s", line);
    regfree(&re);
    return line + m.rm_eo;
}

START_TEST(test_request_line)
{
    struct log_fields f = LOG_FIELDS_INIT;
    const char *line;

    log_set_level(LOG_INFO);
    f.conn = 281474976710657ULL;
    f.client = "127.0.0.1:5555";
    f.listener = "https 127.0.0.1:8443";
    f.host = "api.example.test";
    f.route = "direct";
    f.decision = "inject";
    f.rule = 0;
    f.secret = "OPENAI_API_KEY";
    f.status = 200;
    f.bytes_in = 0;
    f.bytes_out = 1234567;
    f.duration = 0.25;
    line = after_time(capture(LOG_INFO, "request", &f));
    ck_assert_str_eq(line, ",\"level\":\"info\",\"event\":\"request\",\"conn\":281474976710657,"
                           "\"client\":\"127.0.0.1:5555\",\"listener\":\"https 127.0.0.1:8443\","
                           "\"host\":\"api.example.test\",\"route\":\"direct\",\"decision\":"
                           "\"inject\",\"rule\":0,\"secret\":\"OPENAI_API_KEY\",\"status\":200,"
                           "\"bytes_in\":0,\"bytes_out\":1234567,\"duration\":0.250000}\n");
}
END_TEST

/* durations print as "%.6f" does */
START_TEST(test_duration)
{
    static const double d[] = {0.0,       0.0000004,   0.0000006, 0.5, 1.0,
                               59.999999, 123.4567891, 86400.25,  2e9};
    char want[256];

    log_set_level(LOG_INFO);
    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
        struct log_fields f = LOG_FIELDS_INIT;
        const char *line;

        f.duration = d[i];
        line = after_time(capture(LOG_WARN, "x", &f));
        snprintf(want, sizeof(want), ",\"level\":\"warn\",\"event\":\"x\",\"duration\":%.6f}\n",
                 d[i]);
        ck_assert_str_eq(line, want);
    }
}
END_TEST

START_TEST(test_escaping_and_redaction)
{
    struct log_fields f = LOG_FIELDS_INIT;
    const char *line;

    log_set_level(LOG_DEBUG);
    f.host = "a\"b\\c\x01\x7f\xc3\xa9";
    f.reason = "r";
    f.detail = "upstream said: Bearer abcdefghijklmnop rest";
    line = after_time(capture(LOG_DEBUG, "e\n", &f));
    ck_assert_str_eq(line, ",\"level\":\"debug\",\"event\":\"e\\u000a\",\"host\":"
                           "\"a\\\"b\\\\c\\u0001\\u007f\\u00c3\\u00a9\",\"reason\":\"r\","
                           "\"detail\":\"upstream said: Bearer **************** rest\"}\n");
}
END_TEST

/* The escaping of s as the line's format defines it, one byte at a time, into out. */
static void escape_ref(const char *s, char *out)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            out += sprintf(out, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            out += sprintf(out, "\\u00%02x", c);
        else
            *out++ = (char)c;
    }
    *out = '\0';
}

/* One or two bytes that need escaping (and their plain neighbours) at every position of strings
 * of 1 to 19 bytes: the eight-at-a-time scan finds each, in a full word and in the padded tail. */
START_TEST(test_escaping_every_position)
{
    static const unsigned char probes[] = {0x01, 0x1f, 0x20, 0x21, '"',  0x23, 0x5b,
                                           '\\', 0x5d, 0x7e, 0x7f, 0x80, 0xc3, 0xff};
    struct log_fields f = LOG_FIELDS_INIT;
    char s[24], esc[160], want[200];

    log_set_level(LOG_INFO);
    for (size_t n = 1; n < 20; n++) {
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < sizeof(probes); k++) {
                for (size_t j = i; j < n; j += 3) {
                    memset(s, 'x', n);
                    s[n] = '\0';
                    s[i] = (char)probes[k];
                    if (j != i)
                        s[j] = (char)probes[(k + j) % sizeof(probes)];
                    f.host = s;
                    escape_ref(s, esc);
                    snprintf(want, sizeof(want),
                             ",\"level\":\"info\",\"event\":\"e\",\"host\":\"%s\"}\n", esc);
                    ck_assert_str_eq(after_time(capture(LOG_INFO, "e", &f)), want);
                }
            }
        }
    }
}
END_TEST

START_TEST(test_level_filter_and_truncation)
{
    struct log_fields f = LOG_FIELDS_INIT;
    char big[6000];
    const char *line;
    size_t n;

    log_set_level(LOG_WARN);
    ck_assert_str_eq(capture(LOG_INFO, "quiet", NULL), "");
    memset(big, 'h', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    f.host = big;
    line = capture(LOG_ERROR, "long", &f);
    n = strlen(line);
    /* one line of at most LOG_LINE_MAX (4096) bytes, still closed */
    ck_assert_uint_eq(n, 4096);
    ck_assert_str_eq(line + n - 3, "hh}\n" + 1);
}
END_TEST

static int wakes;

static void count_wake(void *arg)
{
    (void)arg;
    wakes++;
}

/* Batched lines wait for log_flush (one wake per batch), a warning writes them first, in order. */
START_TEST(test_batching)
{
    int p[2], saved;
    char buf[8192];
    ssize_t n;
    const char *a, *b, *w;

    log_set_level(LOG_INFO);
    ck_assert_int_eq(pipe(p), 0);
    saved = dup(STDERR_FILENO);
    dup2(p[1], STDERR_FILENO);
    log_batch_begin(count_wake, NULL);
    log_event(LOG_INFO, "first", NULL);
    log_event(LOG_INFO, "second", NULL);
    log_event(LOG_DEBUG, "filtered", NULL);
    ck_assert_int_eq(wakes, 1);
    ck_assert_int_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    ck_assert_int_lt(read(p[0], buf, sizeof(buf)), 0); /* nothing written yet */
    log_event(LOG_WARN, "warned", NULL);
    n = read(p[0], buf, sizeof(buf) - 1);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    a = strstr(buf, "\"event\":\"first\"}\n");
    b = strstr(buf, "\"event\":\"second\"}\n");
    w = strstr(buf, "\"event\":\"warned\"}\n");
    ck_assert_msg(a != NULL && b != NULL && w != NULL && a < b && b < w, "order: %s", buf);
    log_event(LOG_INFO, "third", NULL);
    ck_assert_int_eq(wakes, 2);
    log_flush();
    n = read(p[0], buf, sizeof(buf) - 1);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "\"event\":\"third\"}\n"));
    log_event(LOG_INFO, "fourth", NULL);
    log_batch_end(); /* flushes, then writes line by line again */
    log_event(LOG_INFO, "fifth", NULL);
    n = read(p[0], buf, sizeof(buf) - 1);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "\"event\":\"fourth\"}\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\"event\":\"fifth\"}\n"));
    ck_assert_int_eq(wakes, 3);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[0]);
    close(p[1]);
}
END_TEST

/* A batch that would overflow is written first: every line arrives whole. */
START_TEST(test_batch_full)
{
    int p[2], saved;
    static char buf[1 << 20];
    size_t got = 0, lines = 0;
    ssize_t n;

    log_set_level(LOG_INFO);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_ge(fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 1 << 19);
    saved = dup(STDERR_FILENO);
    dup2(p[1], STDERR_FILENO);
    log_batch_begin(count_wake, NULL);
    for (int i = 0; i < 1000; i++)
        log_event(LOG_INFO, "many", NULL);
    log_batch_end();
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    while ((n = read(p[0], buf + got, sizeof(buf) - got)) > 0)
        got += (size_t)n;
    close(p[0]);
    for (size_t i = 0; i < got; i++)
        lines += buf[i] == '\n';
    ck_assert_uint_eq(lines, 1000);
    ck_assert_int_eq(buf[got - 1], '\n');
    ck_assert_int_eq(strncmp(buf, "{\"time\":", 8), 0);
}
END_TEST

Suite *suite_log(void);

Suite *suite_log(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("format");

    tcase_add_test(tc, test_request_line);
    tcase_add_test(tc, test_duration);
    tcase_add_test(tc, test_escaping_and_redaction);
    tcase_add_test(tc, test_escaping_every_position);
    tcase_add_test(tc, test_level_filter_and_truncation);
    tcase_add_test(tc, test_batching);
    tcase_add_test(tc, test_batch_full);
    suite_add_tcase(s, tc);
    return s;
}
