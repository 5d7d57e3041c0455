/*
 * inject.h - credential injection: rewrite a parsed request head for one rule (SPEC §3-§4).
 *
 * Pure: no I/O. The secret is copied only into the head; the caller sends that head over TLS to
 * the rule's host and nowhere else, then resets it (which wipes the arena).
 */
#ifndef VG_INJECT_H
#define VG_INJECT_H

#include <stddef.h>

#include <time.h>

#include "policy/httphead.h"
#include "policy/policy.h"
#include "policy/sigv4.h"

/* The forms of a rule's secret that reflection masking looks for. */
#define INJECT_MAX_FORMS 3

/* inject_form.flags: the form is a secret's value (the raw secret, a session token, a
 * signature), not an encoding of one made for the wire (basic's base64 of user:secret). The
 * masker also looks for a value's base64 spellings (mask/mask.h). */
#define INJECT_FORM_VALUE 1u

struct inject_form {
    const unsigned char *bytes; /* owned by the policy snapshot */
    size_t len;
    unsigned int flags; /* INJECT_FORM_VALUE or 0 */
};

/*
 * Applies rule `rule` of p to h: bearer/basic set Authorization, header sets <name>, query
 * sets <name>=<percent-encoded secret> in the target (sigv4 rules fail here: inject_sigv4). Every
 * existing instance of the header (or query parameter) is replaced, never duplicated. Returns 0, or
 * -1 (out of memory, head cap exceeded, target not in origin-form for query) with h possibly partly
 * changed: the caller must then not forward h.
 */
int inject_apply(struct http_head *h, const struct policy *p, int rule);

/*
 * Signs h for sigv4 rule `rule` of p (SPEC §3 "AWS Signature Version 4", policy/sigv4.h): the
 * client's signature fields are replaced, X-Amz-Date is now, payload_hash is the body's hex
 * SHA-256 or SIGV4_UNSIGNED. The signature's hex goes to sig_hex (for masking). 0 or -1 (not a
 * sigv4 rule, no Host, out of memory): then h must not be forwarded.
 */
int inject_sigv4(struct http_head *h, const struct policy *p, int rule, const char *payload_hash,
                 time_t now, char sig_hex[SIGV4_HEX_LEN + 1]);

/*
 * Fills forms[] with the distinct byte strings reflection masking looks for, each in every
 * spelling (mask/mask.h): the raw secret, whose spellings include the percent-encoded query
 * value; for basic the base64 of user:secret; for sigv4 the secret key and the session token,
 * to which the exchange adds each request's signature. Every form but basic's base64 is marked
 * INJECT_FORM_VALUE. Returns how many (1..INJECT_MAX_FORMS).
 */
size_t inject_forms(const struct policy *p, int rule, struct inject_form forms[INJECT_MAX_FORMS]);

/*
 * A credential whose value arrives at run time (an oauth2 access token, SPEC §3): rule `rule`'s
 * scheme applied to h with token as the secret, every instance of the header or parameter
 * replaced as inject_apply does. The returned object holds the wire forms (for masking) in
 * wiped memory; free it with inject_token_free once the response is done. NULL (h possibly
 * partly changed: do not forward it) on failure or for a sigv4 rule.
 */
struct inject_token;
struct inject_token *inject_token_apply(struct http_head *h, const struct policy *p, int rule,
                                        const char *token, size_t len);
size_t inject_token_forms(const struct inject_token *t, struct inject_form forms[INJECT_MAX_FORMS]);

/*
 * The wire forms rule `rule` gives `value` without touching a head: for a value the rule's
 * secret held earlier in the run (a refreshed or dropped token, a value a reload replaced, SPEC
 * §4), so its reflections are masked as the current value's are. Any scheme, sigv4 included.
 * Free with inject_token_free. NULL when out of memory.
 */
struct inject_token *inject_token_make(const struct policy *p, int rule, const char *value,
                                       size_t len);

/*
 * Calls fn(name, value, len, arg) for each static secret of old whose value neu does not hold
 * under the same name (changed or removed): the values a reload retires (SPEC §4). oauth2
 * sources have no static value here and are skipped. Pure: fn decides what to keep.
 */
void inject_replaced_values(const struct policy *old, const struct policy *neu,
                            void (*fn)(const char *name, const char *value, size_t len, void *arg),
                            void *arg);
void inject_token_free(struct inject_token **tp);

#endif
