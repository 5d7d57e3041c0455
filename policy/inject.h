/*
 * inject.h - credential injection: rewrite a parsed request head for one rule (SPEC §3-§4).
 *
 * Pure: no I/O. The secret is copied only into the head; the caller sends that head over TLS to
 * the rule's host and nowhere else, then resets it (which wipes the arena).
 */
#ifndef VG_INJECT_H
#define VG_INJECT_H

#include <stddef.h>

#include "policy/httphead.h"
#include "policy/policy.h"

/* The forms of a rule's secret that reflection masking looks for. */
#define INJECT_MAX_FORMS 3
struct inject_form {
    const unsigned char *bytes; /* owned by the policy snapshot */
    size_t len;
};

/*
 * Applies rule `rule` of p to h: bearer/basic set Authorization, header sets <name>, query
 * sets <name>=<percent-encoded secret> in the target. Every existing instance of the header
 * (or query parameter) is replaced, never duplicated. Returns 0, or -1 (out of memory, head
 * cap exceeded, target not in origin-form for query) with h possibly partly changed: the caller
 * must then not forward h.
 */
int inject_apply(struct http_head *h, const struct policy *p, int rule);

/*
 * Fills forms[] with the distinct byte strings reflection masking looks for, each in every
 * spelling (proxy/mask.h): the raw secret, whose spellings include the percent-encoded query
 * value, and for basic the base64 of user:secret. Returns how many (1..INJECT_MAX_FORMS).
 */
size_t inject_forms(const struct policy *p, int rule, struct inject_form forms[INJECT_MAX_FORMS]);

#endif
