/*
 * log.c - JSON-lines event log on stderr.
 *
 * Guarantees: one event is one line, and a line is only ever written whole (alone, or with
 * other whole lines of the same thread: see log_batch_begin), so lines never interleave; the
 * level is checked before any formatting; every string is JSON-escaped; free text passes through
 * the redactor (common/redact.h) first. There is no way to log a path, query, header value or body:
 * struct log_fields has no such field.
 */
#include "audit/log.h"
#include "common/redact.h"
#include "common/timefmt.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_LINE_MAX   4096
#define LOG_DETAIL_MAX 1024

static _Atomic int log_level = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level level)
{
    atomic_store(&log_level, (int)level);
}

int log_parse_level(const char *s, enum log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

bool log_enabled(enum log_level level)
{
    return (int)level <= atomic_load(&log_level);
}

/* A line being formatted into LOG_LINE_MAX bytes at buf: the batch's free space, or a stack
 * buffer when lines are written one by one. */
struct line {
    char *buf;
    size_t len;
};

/* Appends n bytes, truncating at the end of the line (room is kept for the closing "}\n"). */
static void put_mem(struct line *l, const char *s, size_t n)
{
    if (l->len + n >= LOG_LINE_MAX - 2)
        n = LOG_LINE_MAX - 2 - l->len;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

#define PUT_LIT(l, s) put_mem((l), (s), sizeof(s) - 1)

static void put_raw(struct line *l, const char *s)
{
    put_mem(l, s, strlen(s));
}

/* 1 for the bytes JSON needs escaped here: '"', '\', controls, DEL and non-ASCII. */
static int needs_escape(unsigned char c)
{
    return c < 0x20 || c >= 0x7f || c == '"' || c == '\\';
}

#define ONES8 0x0101010101010101u /* 1 in each byte of a 64-bit word */

/*
 * Non-zero when a byte of the eight in x needs escaping (needs_escape), else 0. Exact both ways:
 * below the lowest such byte every byte lies in 0x20-0x7e, so the byte-wise sums and differences
 * borrow and carry nothing there, and that byte sets its own top bit; with no such byte nothing
 * borrows or carries at all.
 */
static uint64_t word_needs_escape(uint64_t x)
{
    uint64_t q = x ^ (ONES8 * '"'), b = x ^ (ONES8 * '\\');

    return (((x - ONES8 * 0x20) & ~x) | x | (x + ONES8) | ((q - ONES8) & ~q) | ((b - ONES8) & ~b)) &
           (ONES8 * 0x80);
}

/* How many of s's n bytes, from the start, need no escaping: whole words of eight up to the
 * first that has such a byte, or all n (the last few padded with plain bytes). */
static size_t plain_run(const char *s, size_t n)
{
    size_t p = 0;
    uint64_t x;

    for (; p + 8 <= n; p += 8) {
        memcpy(&x, s + p, 8);
        if (word_needs_escape(x) != 0)
            return p;
    }
    x = ONES8 * 'a';
    memcpy(&x, s + p, n - p);
    return word_needs_escape(x) == 0 ? n : p;
}

/*
 * s as a JSON string: its plain start (plain_run; most strings of a line are nothing else)
 * copied at once, the rest scanned and copied in one pass, escaped where needed (\u00XX). At the
 * end of the line's room it stops: an escape is written whole or not at all.
 */
static void put_escaped(struct line *l, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    char *w = l->buf + l->len, *const end = l->buf + LOG_LINE_MAX - 2;
    size_t n = strlen(s), p = plain_run(s, n);
    unsigned char c;

    if (w < end)
        *w++ = '"';
    if (p > (size_t)(end - w))
        p = (size_t)(end - w);
    memcpy(w, s, p);
    w += p;
    for (s += p; (c = (unsigned char)*s) != '\0' && w < end; s++) {
        if (!needs_escape(c)) {
            *w++ = (char)c;
        } else if (c == '"' || c == '\\') {
            if (end - w < 2)
                break;
            *w++ = '\\';
            *w++ = (char)c;
        } else {
            if (end - w < 6)
                break;
            memcpy(w, "\\u00", 4);
            w[4] = hex[c >> 4];
            w[5] = hex[c & 15];
            w += 6;
        }
    }
    if (w < end)
        *w++ = '"';
    l->len = (size_t)(w - l->buf);
}

/* ,"key": - key is a literal (its length known at compile time). */
#define PUT_KEY(l, key) PUT_LIT(l, ",\"" key "\":")

static void put_str_k(struct line *l, const char *keyq, size_t keyq_len, const char *val)
{
    if (val == NULL)
        return;
    put_mem(l, keyq, keyq_len);
    put_escaped(l, val);
}

#define PUT_STR(l, key, val) put_str_k((l), ",\"" key "\":", sizeof(",\"" key "\":") - 1, (val))

/* Decimal digits of v (no sign) ending at end; returns the first digit. */
static char *udigits(char *end, unsigned long long v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return end;
}

static void put_ll(struct line *l, long long v)
{
    char tmp[24], *p = udigits(tmp + sizeof(tmp),
                               v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);

    if (v < 0)
        *--p = '-';
    put_mem(l, p, (size_t)(tmp + sizeof(tmp) - p));
}

#define PUT_NUM(l, key, v)                                                                         \
    do {                                                                                           \
        PUT_KEY(l, key);                                                                           \
        put_ll((l), (long long)(v));                                                               \
    } while (0)

/* Seconds with six decimals, as "%.6f" prints them; integer arithmetic for the usual range. */
static void put_seconds(struct line *l, double d)
{
    char tmp[48];

    if (d >= 0 && d < 1e9) {
        long long us = (long long)(d * 1e6 + 0.5);
        char frac[6];

        put_ll(l, us / 1000000);
        us %= 1000000;
        for (int i = 5; i >= 0; i--, us /= 10)
            frac[i] = (char)('0' + us % 10);
        PUT_LIT(l, ".");
        put_mem(l, frac, sizeof(frac));
        return;
    }
    snprintf(tmp, sizeof(tmp), "%.6f", d);
    put_raw(l, tmp);
}

static void put_fields(struct line *l, const struct log_fields *f)
{
    char detail[LOG_DETAIL_MAX];

    if (f->conn != 0)
        PUT_NUM(l, "conn", f->conn);
    PUT_STR(l, "client", f->client);
    PUT_STR(l, "listener", f->listener);
    PUT_STR(l, "host", f->host);
    PUT_STR(l, "proto", f->proto);
    PUT_STR(l, "route", f->route);
    PUT_STR(l, "decision", f->decision);
    if (f->rule >= 0)
        PUT_NUM(l, "rule", f->rule);
    PUT_STR(l, "secret", f->secret);
    if (f->status > 0)
        PUT_NUM(l, "status", f->status);
    if (f->bytes_in >= 0)
        PUT_NUM(l, "bytes_in", f->bytes_in);
    if (f->bytes_out >= 0)
        PUT_NUM(l, "bytes_out", f->bytes_out);
    if (f->duration >= 0) {
        PUT_KEY(l, "duration");
        put_seconds(l, f->duration);
    }
    PUT_STR(l, "reason", f->reason);
    if (f->detail != NULL) {
        size_t n = strnlen(f->detail, sizeof(detail) - 1);

        memcpy(detail, f->detail, n);
        detail[n] = '\0';
        PUT_STR(l, "detail", redact_text(detail));
    }
}

/*
 * The time stamp of a line: the part up to the seconds is formatted once per second and
 * thread (gmtime_r and snprintf cost more than the rest of a request line), the milliseconds
 * each time.
 */
static void put_time(struct line *l)
{
    static _Thread_local int64_t cached_sec = -1;
    static _Thread_local char prefix[TIMEFMT_BUFSZ];
    static _Thread_local size_t prefix_len;
    int64_t ms = timefmt_now_ms(), sec = ms / 1000;
    char tail[4];

    if (sec != cached_sec) {
        char *dot;

        timefmt_iso8601(sec * 1000, prefix, sizeof(prefix));
        dot = strrchr(prefix, '.');
        prefix_len = dot != NULL ? (size_t)(dot - prefix) + 1 : strlen(prefix);
        cached_sec = sec;
    }
    put_mem(l, prefix, prefix_len);
    ms %= 1000;
    tail[0] = (char)('0' + ms / 100);
    tail[1] = (char)('0' + ms / 10 % 10);
    tail[2] = (char)('0' + ms % 10);
    tail[3] = 'Z';
    put_mem(l, tail, sizeof(tail));
}

/*
 * Per-thread batching (log_batch_begin): info and debug lines are formatted straight into this
 * buffer and go out with one write(2) when the owner calls log_flush() (a worker: once per
 * event-loop turn), when less than a line's room (LOG_LINE_MAX) is left for the next one, or
 * ahead of an error or warning line, which is written at once. Only whole
 * lines are written, so lines of different threads never interleave, and a thread's lines keep
 * their order.
 */
#define LOG_BATCH_MAX 16384

static _Thread_local struct {
    bool on;
    size_t len;
    void (*wake)(void *);
    void *arg;
    char buf[LOG_BATCH_MAX];
} batch;

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);

        if (w <= 0)
            return; /* nowhere to report it; the log is best effort */
        p += w;
        n -= (size_t)w;
    }
}

void log_flush(void)
{
    if (batch.len > 0) {
        write_all(batch.buf, batch.len);
        batch.len = 0;
    }
}

void log_batch_begin(void (*wake)(void *), void *arg)
{
    batch.wake = wake;
    batch.arg = arg;
    batch.len = 0;
    batch.on = true;
}

void log_batch_end(void)
{
    log_flush();
    batch.on = false;
    batch.wake = NULL;
}

/*
 * Where the line of an event at level is formatted: straight into this thread's batch (written
 * first when it has less than a line's room left), so a batched line is never copied; else
 * into stack (LOG_LINE_MAX bytes).
 */
static char *line_start(enum log_level level, char *stack)
{
    if (!batch.on || level < LOG_INFO)
        return stack;
    if (sizeof(batch.buf) - batch.len < LOG_LINE_MAX)
        log_flush();
    return batch.buf + batch.len;
}

/* The finished line l: kept in the batch it was formatted into, or written out at once. */
static void line_end(const struct line *l, char *stack)
{
    if (l->buf != stack) {
        bool first = batch.len == 0;

        batch.len += l->len;
        if (first && batch.wake != NULL)
            batch.wake(batch.arg);
        return;
    }
    log_flush();
    write_all(l->buf, l->len);
}

void log_event(enum log_level level, const char *event, const struct log_fields *f)
{
    char stack[LOG_LINE_MAX];
    struct line l;

    if (!log_enabled(level))
        return;
    l.buf = line_start(level, stack);
    l.len = 0;
    PUT_LIT(&l, "{\"time\":\"");
    put_time(&l);
    PUT_LIT(&l, "\"");
    PUT_STR(&l, "level", level_names[level]);
    PUT_STR(&l, "event", event);
    if (f != NULL)
        put_fields(&l, f);
    l.buf[l.len++] = '}';
    l.buf[l.len++] = '\n';
    line_end(&l, stack);
}

void log_eventf(enum log_level level, const char *event, const char *reason, const char *fmt, ...)
{
    struct log_fields f = LOG_FIELDS_INIT;
    char detail[LOG_DETAIL_MAX];
    va_list ap;

    if (!log_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    f.reason = reason;
    f.detail = detail;
    log_event(level, event, &f);
}
