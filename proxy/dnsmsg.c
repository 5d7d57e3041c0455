/*
 * dnsmsg.c - the answer to one DNS query (SPEC §12), a pure codec: bytes in, bytes out.
 *
 * Guarantees: the query is parsed by libldns (ldns_wire2pkt) and the answer written by it
 * (ldns_pkt2wire); this file reads nothing of the message but the header fields libldns's own
 * wire macros name. Every answer holds at most one record (A, AAAA or the probe's TXT), TTL
 * DNSMSG_TTL, in class IN; no name is ever forwarded or looked up. A response is never answered.
 * The name is not kept or logged: the caller gets only a type and an rcode.
 */
#include "proxy/dnsmsg.h"
#include "common/hostname.h"

#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#define DNSMSG_EDNS_UDP 1232 /* the payload size the answer's OPT record announces */

static const char *const type_names[] = {"A", "AAAA", "HTTPS", "SVCB", "TXT", "PTR", "other"};
static const char *const rcode_names[] = {"noerror", "nxdomain", "formerr", "notimp", "servfail"};

const char *dnsmsg_type_name(enum dnsmsg_type t)
{
    return t < DNSMSG_T_COUNT ? type_names[t] : "other";
}

const char *dnsmsg_rcode_name(enum dnsmsg_rcode r)
{
    return r < DNSMSG_R_COUNT ? rcode_names[r] : "servfail";
}

static enum dnsmsg_type type_of(ldns_rr_type t)
{
    switch (t) {
    case LDNS_RR_TYPE_A:
        return DNSMSG_T_A;
    case LDNS_RR_TYPE_AAAA:
        return DNSMSG_T_AAAA;
    case LDNS_RR_TYPE_HTTPS:
        return DNSMSG_T_HTTPS;
    case LDNS_RR_TYPE_SVCB:
        return DNSMSG_T_SVCB;
    case LDNS_RR_TYPE_TXT:
        return DNSMSG_T_TXT;
    case LDNS_RR_TYPE_PTR:
        return DNSMSG_T_PTR;
    default:
        return DNSMSG_T_OTHER;
    }
}

static const uint8_t rcode_values[] = {
    [DNSMSG_R_NOERROR] = LDNS_RCODE_NOERROR,   [DNSMSG_R_NXDOMAIN] = LDNS_RCODE_NXDOMAIN,
    [DNSMSG_R_FORMERR] = LDNS_RCODE_FORMERR,   [DNSMSG_R_NOTIMP] = LDNS_RCODE_NOTIMPL,
    [DNSMSG_R_SERVFAIL] = LDNS_RCODE_SERVFAIL,
};

/* True when name ends with the labels of zone (or is zone). */
static bool under(const char *name, const char *zone)
{
    size_t n = strlen(name), z = strlen(zone);

    return n == z ? strcmp(name, zone) == 0
                  : n > z && name[n - z - 1] == '.' && strcmp(name + n - z, zone) == 0;
}

/*
 * The owner name as a normalised host name in host (HOSTNAME_BUFSZ), or -1 when it is none:
 * ldns writes every byte outside letters, digits and hyphens as an escape, which
 * hostname_normalize() refuses, as it refuses the root, empty labels and an all-digit last label.
 */
static int owner_host(const ldns_rdf *owner, char *host)
{
    char *s = ldns_rdf2str(owner);
    int kind;

    if (s == NULL)
        return -1;
    kind = hostname_normalize(s, strlen(s), host, HOSTNAME_BUFSZ);
    free(s);
    return kind == HOSTNAME_DNS ? 0 : -1;
}

/* One record of type t for owner into the answer section of a. 0 or -1. */
static int add_record(ldns_pkt *a, const ldns_rdf *owner, ldns_rr_type t, ldns_rdf_type rt,
                      const void *data, size_t len)
{
    ldns_rr *rr = ldns_rr_new();
    ldns_rdf *owner_copy = NULL, *rd = NULL;

    if (rr == NULL)
        return -1;
    owner_copy = ldns_rdf_clone(owner);
    rd = ldns_rdf_new_frm_data(rt, len, data);
    if (owner_copy == NULL || rd == NULL)
        goto fail;
    ldns_rr_set_owner(rr, owner_copy);
    owner_copy = NULL;
    ldns_rr_set_type(rr, t);
    ldns_rr_set_class(rr, LDNS_RR_CLASS_IN);
    ldns_rr_set_ttl(rr, DNSMSG_TTL);
    if (!ldns_rr_push_rdf(rr, rd))
        goto fail;
    rd = NULL;
    if (!ldns_pkt_push_rr(a, LDNS_SECTION_ANSWER, rr))
        goto fail;
    return 0;
fail:
    ldns_rdf_deep_free(owner_copy);
    ldns_rdf_deep_free(rd);
    ldns_rr_free(rr);
    return -1;
}

/* The answer section and rcode for the one question qrr. 0 or -1 (out of memory). */
static int answer_question(ldns_pkt *a, const ldns_rr *qrr, const struct dnsmsg_ctx *ctx,
                           struct dnsmsg_result *res)
{
    const ldns_rdf *owner = ldns_rr_owner(qrr);
    ldns_rr_type t = ldns_rr_get_type(qrr);
    bool in = ldns_rr_get_class(qrr) == LDNS_RR_CLASS_IN;
    char host[HOSTNAME_BUFSZ];
    uint8_t txt[1 + 255];
    size_t n;

    res->type = type_of(t);
    if (owner_host(owner, host) < 0 || t == LDNS_RR_TYPE_PTR || under(host, "in-addr.arpa") ||
        under(host, "ip6.arpa")) {
        res->rcode = DNSMSG_R_NXDOMAIN;
        return 0;
    }
    res->rcode = DNSMSG_R_NOERROR;
    if (!in)
        return 0;
    if (t == LDNS_RR_TYPE_A && ctx->have_v4)
        return add_record(a, owner, t, LDNS_RDF_TYPE_A, ctx->v4, 4);
    if (t == LDNS_RR_TYPE_AAAA && ctx->have_v6)
        return add_record(a, owner, t, LDNS_RDF_TYPE_AAAA, ctx->v6, 16);
    if (t == LDNS_RR_TYPE_TXT && strcmp(host, DNSMSG_PROBE_NAME) == 0 && ctx->run_id != NULL) {
        n = strlen(ctx->run_id);
        n = n > 255 ? 255 : n;
        txt[0] = (uint8_t)n;
        memcpy(txt + 1, ctx->run_id, n);
        return add_record(a, owner, t, LDNS_RDF_TYPE_STR, txt, n + 1);
    }
    return 0; /* NODATA */
}

/* Header fields of the answer: id, opcode and RD/CD copied from the query. */
static ldns_pkt *answer_new(const uint8_t *q)
{
    ldns_pkt *a = ldns_pkt_new();

    if (a == NULL)
        return NULL;
    ldns_pkt_set_id(a, LDNS_ID_WIRE(q));
    ldns_pkt_set_qr(a, true);
    ldns_pkt_set_opcode(a, (ldns_pkt_opcode)LDNS_OPCODE_WIRE(q));
    ldns_pkt_set_rd(a, LDNS_RD_WIRE(q) != 0);
    ldns_pkt_set_cd(a, LDNS_CD_WIRE(q) != 0);
    ldns_pkt_set_ra(a, true); /* the sandbox's resolver: "recursion" is what it is asked for */
    return a;
}

/* Writes a into out. The length, or 0 when it cannot (out of memory, too long). */
static size_t answer_write(const ldns_pkt *a, uint8_t *out, size_t outsz)
{
    uint8_t *wire = NULL;
    size_t len = 0;

    if (ldns_pkt2wire(&wire, a, &len) != LDNS_STATUS_OK || len > outsz)
        len = 0;
    else
        memcpy(out, wire, len);
    free(wire);
    return len;
}

/* The header alone with an error rcode (FORMERR, NOTIMP, SERVFAIL): built from the query's
 * header, which is all there may be to read. */
static size_t answer_error(const uint8_t *q, enum dnsmsg_rcode rc, uint8_t *out, size_t outsz,
                           struct dnsmsg_result *res)
{
    ldns_pkt *a = answer_new(q);
    size_t len = 0;

    res->rcode = rc;
    if (a != NULL) {
        ldns_pkt_set_rcode(a, rcode_values[rc]);
        len = answer_write(a, out, outsz);
        ldns_pkt_free(a);
    }
    return len;
}

size_t dnsmsg_answer(const uint8_t *q, size_t qlen, const struct dnsmsg_ctx *ctx, uint8_t *out,
                     size_t outsz, struct dnsmsg_result *res)
{
    ldns_pkt *qp = NULL, *a = NULL;
    ldns_rr *qrr;
    size_t len = 0;

    res->type = DNSMSG_T_OTHER;
    res->rcode = DNSMSG_R_FORMERR;
    if (qlen < LDNS_HEADER_SIZE || LDNS_QR_WIRE(q))
        return 0;
    if (LDNS_OPCODE_WIRE(q) != LDNS_PACKET_QUERY)
        return answer_error(q, DNSMSG_R_NOTIMP, out, outsz, res);
    if (ldns_wire2pkt(&qp, q, qlen) != LDNS_STATUS_OK || ldns_pkt_qdcount(qp) != 1 ||
        ldns_rr_list_rr_count(ldns_pkt_question(qp)) != 1) {
        len = answer_error(q, DNSMSG_R_FORMERR, out, outsz, res);
        goto out;
    }
    qrr = ldns_rr_list_rr(ldns_pkt_question(qp), 0);
    a = answer_new(q);
    if (a == NULL || answer_question(a, qrr, ctx, res) < 0)
        goto servfail;
    ldns_pkt_set_aa(a, true);
    ldns_pkt_set_rcode(a, rcode_values[res->rcode]);
    qrr = ldns_rr_clone(qrr);
    if (qrr == NULL || !ldns_pkt_push_rr(a, LDNS_SECTION_QUESTION, qrr)) {
        ldns_rr_free(qrr);
        goto servfail;
    }
    if (ldns_pkt_edns(qp))
        ldns_pkt_set_edns_udp_size(a, DNSMSG_EDNS_UDP);
    len = answer_write(a, out, outsz);
    if (len > 0)
        goto out;
servfail:
    len = answer_error(q, DNSMSG_R_SERVFAIL, out, outsz, res);
out:
    ldns_pkt_free(a);
    ldns_pkt_free(qp);
    return len;
}
