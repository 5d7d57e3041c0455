/*
 * vaultq.h - vaults for the unit tests written as C strings with single quotes ("{'version':1}"),
 * turned into JSON and parsed from a guard-page copy (guard.h). Shared by the vault and policy
 * suites.
 */
#ifndef VG_TEST_VAULTQ_H
#define VG_TEST_VAULTQ_H

#include <stddef.h>

#include "policy/policy.h"

/* src with every ' turned into "; the caller frees. */
char *vaultq_json(const char *src);

/* policy_parse() of src (single-quoted), err filled (errlen bytes) when it refuses. */
struct policy *vaultq_parse(const char *src, char *err, size_t errlen);

/* vaultq_parse() that must succeed (the test fails with the error otherwise). */
struct policy *vaultq_parse_ok(const char *src);

#endif
