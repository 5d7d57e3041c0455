/*
 * admin_page.h - the status page of the admin API (SPEC §7): one run at a glance for a person,
 * rendered from the same /v1/status object the JSON endpoint serves, the request counters and
 * this run's audit rows.
 */
#ifndef VG_ADMIN_PAGE_H
#define VG_ADMIN_PAGE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "proxy/metrics.h"

struct admin_page_input {
    const cJSON *status;     /* the /v1/status object (may lack members: shown as "-") */
    const cJSON *blocked;    /* blocked_host_log rows of this run, or NULL */
    const cJSON *routes;     /* egress_route_log rows of this run, or NULL */
    const char *rows_reason; /* why blocked/routes are NULL: "audit is off", "audit store
                                unavailable"; NULL when they were read */
    struct metrics_totals totals;
};

/*
 * The page: semantic HTML5, the enforcement state first, every value HTML-escaped, no script,
 * one stylesheet (/status.css), a 5 s meta refresh. Caller frees with free(); NULL when out of
 * memory. At most VG_ADMIN_PAGE_MAX_ROWS rows per table, the largest counts first.
 */
char *admin_page_render(const struct admin_page_input *in, size_t *len);

/* The stylesheet served at /status.css. */
const char *admin_page_css(size_t *len);

/* "enforced", "nothing_to_enforce" or "degraded" from warnings and whether the vault enforces
 * anything (SPEC §7: any warning is degraded; the note applies only when there is none). */
const char *admin_enforcement(size_t nwarnings, int nothing_to_enforce);

#endif
