/*
 * allowlist.h - `vaultgate audit suggest` (SPEC §12): from the hosts a run reported or refused
 * to a host_policy fragment of `allow` entries an operator can paste into the vault.
 *
 * A pure function of the rows it is given: no store, no vault, no secret, no I/O.
 */
#ifndef VG_ALLOWLIST_H
#define VG_ALLOWLIST_H

#include <stdint.h>

#include <cjson/cJSON.h>

struct psl_ctx_st;

/*
 * seen: the rows of audit_query(AUDIT_TABLE_SEEN), objects {host, route, count} with route
 * `reported` or `refused` (egress_route_log) or `blocked` (blocked_host_log). A host counts
 * reported + max(refused, blocked) (a refusal is in both tables); hosts seen fewer than
 * min_count times, and names that are not host names or IP literals (`(no-sni)`), are left out.
 * Three or more names strictly under one registrable domain of psl (NULL: no collapsing) become
 * one `*.<domain>` entry counting their sum; IP literals and a registrable domain itself stay
 * exact. Entries are most seen first (then by name), at most VG_VAULT_MAX_HOST_ENTRIES.
 *
 * *fragment gets {"host_policy": {"hosts": {<pattern>: "allow", ...}}} and *lines one line per
 * host seen, "<host> <count> <route>[ <fate>]\n" (route `reported`, `refused` or
 * `reported,refused`; fate `under *.<domain>`, `below --min-count`, `not a host name` or
 * `over the entry limit`), both the caller's (cJSON_Delete, free). 0, or -1 when out of memory.
 */
int allowlist_suggest(const cJSON *seen, uint64_t min_count, const struct psl_ctx_st *psl,
                      cJSON **fragment, char **lines);

#endif
