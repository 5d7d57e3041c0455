/*
 * credwire.h - what every credential kind (policy/cred_<kind>.c) builds with: a wire value in a
 * new buffer, the forms the masker looks for, the percent-encoding of a query value, and the
 * two places of a request head a secret goes (a header field, a query parameter).
 *
 * Pure: no I/O. Buffers that held a secret are wiped by whoever frees them (common/secmem.h).
 */
#ifndef VG_CREDWIRE_H
#define VG_CREDWIRE_H

#include <stddef.h>

#include "policy/httphead.h"
#include "policy/policy_int.h"

/* prefix + body into a new malloc'd buffer of *outlen bytes plus NUL. 0 or -1. */
int cred_concat(const char *prefix, const char *body, size_t blen, char **out, size_t *outlen);

/* Adds a form to w unless it is there already (a value twice keeps the value flag). The bytes
 * must outlive w. At most INJECT_MAX_FORMS forms: a kind adds no more than it declares. */
void cred_add_form(struct policy_wire *w, const char *bytes, size_t len, unsigned int flags);

/* Percent-encodes len bytes (RFC 3986 unreserved kept, others %XX upper case) into a new
 * buffer of *outlen bytes plus NUL (wipe it with secmem_free). NULL when out of memory. */
char *cred_pct_encode(const char *s, size_t len, size_t *outlen);

/* Replaces every field `name` of h by one `name: value` at the position of the first of them
 * (or last). 0 or -1 (out of memory, head cap). */
int cred_set_header(struct http_head *h, const char *name, const char *value, size_t vlen);

/* Replaces every query parameter of h's target whose name percent-decodes to `name` by one
 * name=value at the position of the first of them (or last); value is sent as given. 0 or -1
 * (target not in origin-form, out of memory, head cap). */
int cred_set_query(struct http_head *h, const char *name, const char *value, size_t vlen);

#endif
