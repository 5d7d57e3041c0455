/*
 * log.h - the event log: JSON lines on stderr (SPEC §8).
 *
 * Callers pass structured fields, never a formatted request: there is no field for a path,
 * query, header value or body, and free text from peers (`detail`) goes through the redactor.
 */
#ifndef VG_LOG_H
#define VG_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level {
    LOG_ERROR = 0,
    LOG_WARN,
    LOG_INFO,
    LOG_DEBUG,
};

/* Zero-initialise, then set what applies; rule -1, status 0, bytes -1, duration < 0 mean unset. */
struct log_fields {
    uint64_t conn;        /* connection id, 0 if none */
    const char *client;   /* client address "ip:port" */
    const char *listener; /* e.g. "https 127.0.0.1:8443" */
    const char *host;     /* normalised host */
    const char *proto;    /* the client's protocol: http/1.1 | h2 */
    const char *route;    /* direct | tunnel | refused */
    const char *decision; /* inject | allow | block | error */
    int rule;             /* rule index */
    const char *secret;   /* secret NAME, never its value */
    int status;           /* HTTP status answered */
    int64_t bytes_in;     /* bytes from the client */
    int64_t bytes_out;    /* bytes to the client */
    double duration;      /* seconds */
    const char *reason;   /* a fixed reason code from vaultgate's own code */
    const char *detail;   /* free text (peer errors, OpenSSL); redacted before writing */
};

#define LOG_FIELDS_INIT                                                                            \
    {                                                                                              \
        .rule = -1, .bytes_in = -1, .bytes_out = -1, .duration = -1.0                              \
    }

void log_set_level(enum log_level level);
int log_parse_level(const char *s, enum log_level *out);
bool log_enabled(enum log_level level);

/* Writes one JSON line (whole, so lines from threads never interleave). f may be NULL. */
void log_event(enum log_level level, const char *event, const struct log_fields *f);

/*
 * Batching for an event-loop thread: from log_batch_begin() on, this thread's info and debug
 * lines are collected and written together, whole lines in one write(2), by log_flush(), which
 * the caller runs at the end of each loop turn; wake(arg) is called when a line arrives in an
 * empty batch, to schedule that flush. A full batch is written at once, and an error or warning
 * line first writes the batch and then itself, so nothing is reordered and nothing waits behind
 * a quiet loop. log_batch_end() flushes and returns the thread to one write per line.
 */
void log_batch_begin(void (*wake)(void *), void *arg);
void log_flush(void);
void log_batch_end(void);

/* Shorthand: event with a reason code and a redacted printf-style detail. */
void log_eventf(enum log_level level, const char *event, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
