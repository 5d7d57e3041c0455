/*
 * policy_int.h - what the policy module's own files (inject.c) and its tests and fuzzers see
 * of a snapshot beyond policy.h. Not for the proxy or the CA.
 */
#ifndef VG_POLICY_INT_H
#define VG_POLICY_INT_H

#include <stddef.h>

#include "policy/inject.h"
#include "policy/policy.h"
#include "policy/vault.h"

/* A rule's secret as it goes on the wire, computed once at load; all of it is wiped on free. */
struct policy_wire {
    const char *value; /* header value ("Bearer <s>", "Basic <b64>", <s>) or encoded query value */
    size_t value_len;
    struct inject_form forms[INJECT_MAX_FORMS];
    size_t nforms;
};

/* The validated vault behind p. */
const struct vault *policy_vault(const struct policy *p);

/* Wire material of rule `rule`, or NULL when rule is out of range. */
const struct policy_wire *policy_wire(const struct policy *p, int rule);

/*
 * The wire material of rule `rule` for a secret given at run time (an oauth2 access token):
 * w->value is a new buffer of *alloc_len bytes (wipe and free it with secmem_free), the forms
 * point into it and into secret, which must outlive w. 0 or -1.
 */
int policy_wire_make(const struct policy *p, int rule, const char *secret, size_t len,
                     struct policy_wire *w, size_t *alloc_len);

#endif
