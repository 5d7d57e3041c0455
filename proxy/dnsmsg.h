/*
 * dnsmsg.h - the answer vaultgate's DNS listener gives to one query (SPEC §12): a pure codec, no
 * event loop and no socket. libldns parses the query and writes the answer; this module only
 * decides what the answer says.
 */
#ifndef VG_DNSMSG_H
#define VG_DNSMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The name the probe asks for TXT (SPEC §12): the answer is the run id. */
#define DNSMSG_PROBE_NAME "probe.vaultgate.invalid"
#define DNSMSG_TTL        5 /* seconds, every record */

/* Label values of vaultgate_dns_queries_total (metrics.h keeps the same order). */
enum dnsmsg_type {
    DNSMSG_T_A = 0,
    DNSMSG_T_AAAA,
    DNSMSG_T_HTTPS,
    DNSMSG_T_SVCB,
    DNSMSG_T_TXT,
    DNSMSG_T_PTR,
    DNSMSG_T_OTHER, /* any other type, and a query without a readable question */
    DNSMSG_T_COUNT,
};

enum dnsmsg_rcode {
    DNSMSG_R_NOERROR = 0,
    DNSMSG_R_NXDOMAIN,
    DNSMSG_R_FORMERR,
    DNSMSG_R_NOTIMP,
    DNSMSG_R_SERVFAIL,
    DNSMSG_R_COUNT,
};

/* What A and AAAA answer for this query: --dns-answer, or the address it arrived on. */
struct dnsmsg_ctx {
    bool have_v4, have_v6;
    uint8_t v4[4];
    uint8_t v6[16];
    const char *run_id; /* the current snapshot's; the TXT answer of DNSMSG_PROBE_NAME */
};

struct dnsmsg_result {
    enum dnsmsg_type type;
    enum dnsmsg_rcode rcode;
};

/*
 * Answers the DNS message of qlen bytes at q into out (outsz bytes; DNSMSG_OUT_MAX always
 * fits every answer this module writes). Returns the answer's length, or 0 when the message
 * gets no answer at all: shorter than a DNS header, or itself a response (answering those
 * would let two servers bounce packets at each other). *res is set either way.
 */
#define DNSMSG_OUT_MAX 512
size_t dnsmsg_answer(const uint8_t *q, size_t qlen, const struct dnsmsg_ctx *ctx, uint8_t *out,
                     size_t outsz, struct dnsmsg_result *res);

/* "A", "AAAA", ... and "noerror", "nxdomain", ... (metric labels). */
const char *dnsmsg_type_name(enum dnsmsg_type t);
const char *dnsmsg_rcode_name(enum dnsmsg_rcode r);

#endif
