/*
 * fuzz_dns.c - the DNS listener's answer (proxy/dnsmsg.c: libldns's parser and vaultgate's
 * answer logic) on arbitrary bytes, exactly as dns.c hands it a datagram or a TCP message.
 *
 * Input: byte 0 picks what the run gives (bit 0: an IPv4 answer, bit 1: an IPv6 answer, bit 2:
 * a run id), the rest is the query. Invariants (abort on violation): an answer is produced
 * unless the input is shorter than a DNS header or is a response; an answer parses (libldns),
 * has the query's id and opcode, QR set, the rcode reported to the metric, no authority
 * records, at most one answer record and at most an OPT beside it; a record only with NOERROR,
 * and then A = the IPv4 answer, AAAA = the IPv6 one, TXT = the run id, TTL 5; an opcode other
 * than QUERY is NOTIMP.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "proxy/dnsmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t rcode_wire[] = {LDNS_RCODE_NOERROR, LDNS_RCODE_NXDOMAIN, LDNS_RCODE_FORMERR,
                                     LDNS_RCODE_NOTIMPL, LDNS_RCODE_SERVFAIL};

/* The one answer record against what the run gives. */
static void check_record(const ldns_rr *rr, const struct dnsmsg_ctx *ctx)
{
    const ldns_rdf *rd;

    if (ldns_rr_ttl(rr) != DNSMSG_TTL || ldns_rr_rd_count(rr) != 1)
        abort();
    rd = ldns_rr_rdf(rr, 0);
    switch (ldns_rr_get_type(rr)) {
    case LDNS_RR_TYPE_A:
        if (!ctx->have_v4 || ldns_rdf_size(rd) != 4 || memcmp(ldns_rdf_data(rd), ctx->v4, 4))
            abort();
        break;
    case LDNS_RR_TYPE_AAAA:
        if (!ctx->have_v6 || ldns_rdf_size(rd) != 16 || memcmp(ldns_rdf_data(rd), ctx->v6, 16))
            abort();
        break;
    case LDNS_RR_TYPE_TXT:
        if (ctx->run_id == NULL || ldns_rdf_size(rd) != strlen(ctx->run_id) + 1 ||
            memcmp(ldns_rdf_data(rd) + 1, ctx->run_id, strlen(ctx->run_id)) != 0)
            abort();
        break;
    default:
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dnsmsg_ctx ctx = {.v4 = {192, 0, 2, 7}, .v6 = {0x20, 0x01, 0x0d, 0xb8, [15] = 7}};
    struct dnsmsg_result res;
    uint8_t out[DNSMSG_OUT_MAX];
    const uint8_t *q;
    ldns_pkt *a = NULL;
    size_t len, qlen;

    if (size < 1)
        return 0;
    ctx.have_v4 = (data[0] & 1) != 0;
    ctx.have_v6 = (data[0] & 2) != 0;
    ctx.run_id = (data[0] & 4) != 0 ? "run-fuzz-1" : NULL;
    q = data + 1;
    qlen = size - 1;
    len = dnsmsg_answer(q, qlen, &ctx, out, sizeof(out), &res);
    if (qlen < LDNS_HEADER_SIZE || LDNS_QR_WIRE(q)) {
        if (len != 0)
            abort();
        return 0;
    }
    if (len == 0 || len > sizeof(out) || ldns_wire2pkt(&a, out, len) != LDNS_STATUS_OK)
        abort();
    if (ldns_pkt_id(a) != LDNS_ID_WIRE(q) || !ldns_pkt_qr(a) ||
        ldns_pkt_get_opcode(a) != (ldns_pkt_opcode)LDNS_OPCODE_WIRE(q) ||
        res.rcode >= DNSMSG_R_COUNT || ldns_pkt_get_rcode(a) != rcode_wire[res.rcode] ||
        res.type >= DNSMSG_T_COUNT || ldns_pkt_nscount(a) != 0 || ldns_pkt_ancount(a) > 1 ||
        ldns_rr_list_rr_count(ldns_pkt_additional(a)) != 0)
        abort();
    if (LDNS_OPCODE_WIRE(q) != LDNS_PACKET_QUERY && res.rcode != DNSMSG_R_NOTIMP)
        abort();
    if (ldns_pkt_ancount(a) == 1) {
        if (res.rcode != DNSMSG_R_NOERROR || ldns_pkt_qdcount(a) != 1)
            abort();
        check_record(ldns_rr_list_rr(ldns_pkt_answer(a), 0), &ctx);
    }
    ldns_pkt_free(a);
    return 0;
}
