/*
 * log.c - JSON-lines event log on stderr, with the redactor.
 *
 * Guarantees: one event is one line written with one write(2); the level is checked before any
 * formatting; every string is JSON-escaped; free text passes through log_redact() first. There
 * is no way to log a path, query, header value or body: struct log_fields has no such field.
 */
#include "audit/log.h"
#include "common/timefmt.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_LINE_MAX   4096
#define LOG_DETAIL_MAX 1024
/* A run of token characters at least this long is treated as a credential. */
#define LOG_TOKEN_RUN  32

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

struct line {
    char buf[LOG_LINE_MAX];
    size_t len;
};

static void put_raw(struct line *l, const char *s)
{
    size_t n = strlen(s);

    if (l->len + n >= sizeof(l->buf) - 2)
        n = sizeof(l->buf) - 2 - l->len;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_escaped(struct line *l, const char *s)
{
    char tmp[8];

    put_raw(l, "\"");
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            tmp[2] = '\0';
        } else if (c < 0x20 || c >= 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", c);
        } else {
            tmp[0] = (char)c;
            tmp[1] = '\0';
        }
        put_raw(l, tmp);
    }
    put_raw(l, "\"");
}

static void put_str(struct line *l, const char *key, const char *val)
{
    if (val == NULL)
        return;
    put_raw(l, ",\"");
    put_raw(l, key);
    put_raw(l, "\":");
    put_escaped(l, val);
}

static void put_num(struct line *l, const char *key, long long v)
{
    char tmp[24];

    snprintf(tmp, sizeof(tmp), "%lld", v);
    put_raw(l, ",\"");
    put_raw(l, key);
    put_raw(l, "\":");
    put_raw(l, tmp);
}

static void put_fields(struct line *l, const struct log_fields *f)
{
    char detail[LOG_DETAIL_MAX];
    char tmp[48];

    if (f->conn != 0)
        put_num(l, "conn", (long long)f->conn);
    put_str(l, "client", f->client);
    put_str(l, "listener", f->listener);
    put_str(l, "host", f->host);
    put_str(l, "route", f->route);
    put_str(l, "decision", f->decision);
    if (f->rule >= 0)
        put_num(l, "rule", f->rule);
    put_str(l, "secret", f->secret);
    if (f->status > 0)
        put_num(l, "status", f->status);
    if (f->bytes_in >= 0)
        put_num(l, "bytes_in", f->bytes_in);
    if (f->bytes_out >= 0)
        put_num(l, "bytes_out", f->bytes_out);
    if (f->duration >= 0) {
        snprintf(tmp, sizeof(tmp), ",\"duration\":%.6f", f->duration);
        put_raw(l, tmp);
    }
    put_str(l, "reason", f->reason);
    if (f->detail != NULL) {
        size_t n = strnlen(f->detail, sizeof(detail) - 1);

        memcpy(detail, f->detail, n);
        detail[n] = '\0';
        put_str(l, "detail", log_redact(detail));
    }
}

void log_event(enum log_level level, const char *event, const struct log_fields *f)
{
    struct line l;
    char ts[TIMEFMT_BUFSZ];
    ssize_t w;

    if (!log_enabled(level))
        return;
    l.len = 0;
    put_raw(&l, "{\"time\":\"");
    put_raw(&l, timefmt_iso8601(timefmt_now_ms(), ts, sizeof(ts)));
    put_raw(&l, "\"");
    put_str(&l, "level", level_names[level]);
    put_str(&l, "event", event);
    if (f != NULL)
        put_fields(&l, f);
    l.buf[l.len++] = '}';
    l.buf[l.len++] = '\n';
    w = write(STDERR_FILENO, l.buf, l.len);
    (void)w;
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

static int is_token_char(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '+' || c == '/' || c == '=' ||
           c == '~';
}

static void mask(char *s, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        s[i] = '*';
}

/* Length of the token starting at s (token characters only). */
static size_t token_len(const char *s)
{
    size_t n = 0;

    while (s[n] != '\0' && is_token_char((unsigned char)s[n]))
        n++;
    return n;
}

static const char *const secret_prefixes[] = {
    "sk-", "sk_", "pk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "AKIA", "ASIA", "AIza", "hf_", "npm_",
};

/* Words after which the next token is a credential: "Bearer x", "password=x", "key: x". */
static const char *const secret_keys[] = {
    "bearer", "basic", "token", "password", "passwd", "secret", "apikey", "api_key", "api-key",
    "key", "authorization", "auth", "credential", "x-api-key",
};

static int after_key(const char *s, size_t start)
{
    size_t end = start, i;

    /* skip separators backwards: spaces, '=', ':', '"' */
    while (end > 0 && strchr(" =:\"'", s[end - 1]) != NULL)
        end--;
    if (end == start)
        return 0;
    i = end;
    while (i > 0 && (isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_' || s[i - 1] == '-'))
        i--;
    for (size_t k = 0; k < sizeof(secret_keys) / sizeof(secret_keys[0]); k++) {
        size_t kl = strlen(secret_keys[k]);

        if (end - i == kl && strncasecmp(s + i, secret_keys[k], kl) == 0)
            return 1;
    }
    return 0;
}

char *log_redact(char *s)
{
    size_t i = 0;

    while (s[i] != '\0') {
        size_t n;
        int hit = 0;

        if (!is_token_char((unsigned char)s[i])) {
            i++;
            continue;
        }
        n = token_len(s + i);
        if (n >= LOG_TOKEN_RUN)
            hit = 1;
        for (size_t k = 0; !hit && k < sizeof(secret_prefixes) / sizeof(secret_prefixes[0]); k++) {
            size_t pl = strlen(secret_prefixes[k]);

            if (n > pl && strncmp(s + i, secret_prefixes[k], pl) == 0)
                hit = 1;
        }
        if (!hit && n >= 8 && after_key(s, i))
            hit = 1;
        if (hit)
            mask(s, i, i + n);
        i += n;
    }
    return s;
}
