/*
 * test_dnsmsg.c - the DNS listener's answers (proxy/dnsmsg.c, SPEC §12): every row of the table
 * in docs/internals/dns.md, with the query placed at the end of a guard page, the answer read
 * back with libldns.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include <ldns/ldns.h>

#include "proxy/dnsmsg.h"
#include "tests/unit/guard.h"

#define T_A     1
#define T_NS    2
#define T_PTR   12
#define T_MX    15
#define T_TXT   16
#define T_AAAA  28
#define T_SVCB  64
#define T_HTTPS 65

/* A query: header (id 0x1234, flags, qdcount) and, when name != NULL, one question. */
static size_t query(uint8_t *b, unsigned flags, unsigned qd, const char *name, unsigned qtype,
                    unsigned qclass)
{
    size_t n = 12;

    memset(b, 0, 12);
    b[0] = 0x12, b[1] = 0x34, b[2] = (uint8_t)(flags >> 8), b[3] = (uint8_t)flags;
    b[5] = (uint8_t)qd;
    if (name == NULL)
        return n;
    for (const char *p = name; *p != '\0';) {
        const char *dot = strchr(p, '.');
        size_t l = dot != NULL ? (size_t)(dot - p) : strlen(p);

        b[n++] = (uint8_t)l;
        memcpy(b + n, p, l);
        n += l;
        p += l + (dot != NULL);
    }
    b[n++] = 0;
    b[n++] = (uint8_t)(qtype >> 8), b[n++] = (uint8_t)qtype;
    b[n++] = (uint8_t)(qclass >> 8), b[n++] = (uint8_t)qclass;
    return n;
}

static const struct {
    const char *name;
    unsigned qtype, qclass, flags;
    int v4, v6;            /* what --dns-answer / the arrival address give */
    enum dnsmsg_type type; /* the metric's label */
    enum dnsmsg_rcode rcode;
    const char *rdata; /* the one record's data as text, NULL for none */
} cases[] = {
    {"api.example.test", T_A, 1, 0x0100, 1, 0, DNSMSG_T_A, DNSMSG_R_NOERROR, "192.0.2.7"},
    {"api.example.test", T_A, 1, 0x0100, 0, 1, DNSMSG_T_A, DNSMSG_R_NOERROR, NULL},
    {"API.Example.TEST", T_A, 1, 0x0000, 1, 1, DNSMSG_T_A, DNSMSG_R_NOERROR, "192.0.2.7"},
    {"x.example.test", T_AAAA, 1, 0x0100, 1, 1, DNSMSG_T_AAAA, DNSMSG_R_NOERROR, "2001:db8::7"},
    {"x.example.test", T_AAAA, 1, 0x0100, 1, 0, DNSMSG_T_AAAA, DNSMSG_R_NOERROR, NULL},
    {"x.example.test", T_HTTPS, 1, 0x0100, 1, 1, DNSMSG_T_HTTPS, DNSMSG_R_NOERROR, NULL},
    {"_dns.x.test", T_SVCB, 1, 0x0100, 1, 1, DNSMSG_T_SVCB, DNSMSG_R_NXDOMAIN, NULL},
    {"x.example.test", T_SVCB, 1, 0x0100, 1, 1, DNSMSG_T_SVCB, DNSMSG_R_NOERROR, NULL},
    {"x.example.test", T_MX, 1, 0x0100, 1, 1, DNSMSG_T_OTHER, DNSMSG_R_NOERROR, NULL},
    {"x.example.test", T_NS, 1, 0x0100, 1, 1, DNSMSG_T_OTHER, DNSMSG_R_NOERROR, NULL},
    {"x.example.test", T_TXT, 1, 0x0100, 1, 1, DNSMSG_T_TXT, DNSMSG_R_NOERROR, NULL},
    {"probe.vaultgate.invalid", T_TXT, 1, 0x0100, 1, 1, DNSMSG_T_TXT, DNSMSG_R_NOERROR,
     "\"run-unit-1\""},
    {"Probe.VaultGate.Invalid", T_TXT, 1, 0x0100, 0, 0, DNSMSG_T_TXT, DNSMSG_R_NOERROR,
     "\"run-unit-1\""},
    {"probe.vaultgate.invalid", T_TXT, 3, 0x0100, 1, 1, DNSMSG_T_TXT, DNSMSG_R_NOERROR, NULL},
    {"probe.vaultgate.invalid", T_A, 1, 0x0100, 1, 1, DNSMSG_T_A, DNSMSG_R_NOERROR, "192.0.2.7"},
    {"x.example.test", T_A, 3, 0x0100, 1, 1, DNSMSG_T_A, DNSMSG_R_NOERROR, NULL}, /* CHAOS */
    {"1.0.0.127.in-addr.arpa", T_PTR, 1, 0x0100, 1, 1, DNSMSG_T_PTR, DNSMSG_R_NXDOMAIN, NULL},
    {"1.0.0.127.in-addr.arpa", T_A, 1, 0x0100, 1, 1, DNSMSG_T_A, DNSMSG_R_NXDOMAIN, NULL},
    {"in-addr.arpa", T_NS, 1, 0x0100, 1, 1, DNSMSG_T_OTHER, DNSMSG_R_NXDOMAIN, NULL},
    {"b.a.ip6.arpa", T_AAAA, 1, 0x0100, 1, 1, DNSMSG_T_AAAA, DNSMSG_R_NXDOMAIN, NULL},
    {"x.example.test", T_PTR, 1, 0x0100, 1, 1, DNSMSG_T_PTR, DNSMSG_R_NXDOMAIN, NULL},
    {"notin-addr.arpa", T_A, 1, 0x0100, 1, 1, DNSMSG_T_A, DNSMSG_R_NOERROR, "192.0.2.7"},
    {"_dmarc.example.test", T_TXT, 1, 0x0100, 1, 1, DNSMSG_T_TXT, DNSMSG_R_NXDOMAIN, NULL},
    {"a b.example.test", T_A, 1, 0x0100, 1, 1, DNSMSG_T_A, DNSMSG_R_NXDOMAIN, NULL},
    {"x.1.2.3", T_A, 1, 0x0100, 1, 1, DNSMSG_T_A, DNSMSG_R_NXDOMAIN, NULL},
    {"-x.example.test", T_A, 1, 0x0100, 1, 1, DNSMSG_T_A, DNSMSG_R_NXDOMAIN, NULL},
    {"", T_NS, 1, 0x0100, 1, 1, DNSMSG_T_OTHER, DNSMSG_R_NXDOMAIN, NULL},            /* the root */
    {"x.example.test", T_A, 1, 0x1100, 1, 1, DNSMSG_T_OTHER, DNSMSG_R_NOTIMP, NULL}, /* STATUS */
    {"x.example.test", 6, 1, 0x2000, 1, 1, DNSMSG_T_OTHER, DNSMSG_R_NOTIMP, NULL},   /* NOTIFY */
    {"x.example.test", 6, 1, 0x2800, 1, 1, DNSMSG_T_OTHER, DNSMSG_R_NOTIMP, NULL},   /* UPDATE */
};

static void answer_ctx(struct dnsmsg_ctx *ctx, int v4, int v6)
{
    static const uint8_t a4[4] = {192, 0, 2, 7};
    static const uint8_t a6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 7};

    memset(ctx, 0, sizeof(*ctx));
    ctx->have_v4 = v4 != 0;
    ctx->have_v6 = v6 != 0;
    memcpy(ctx->v4, a4, 4);
    memcpy(ctx->v6, a6, 16);
    ctx->run_id = "run-unit-1";
}

/* Answers len bytes of b placed at a guard page; parses the answer into *a. Returns its length. */
static size_t answer(const uint8_t *b, size_t len, const struct dnsmsg_ctx *ctx,
                     struct dnsmsg_result *res, ldns_pkt **a)
{
    char *g = guard_copy(b, len);
    uint8_t out[DNSMSG_OUT_MAX];
    size_t n = dnsmsg_answer((const uint8_t *)g, len, ctx, out, sizeof(out), res);

    guard_free(g, len);
    *a = NULL;
    if (n > 0)
        ck_assert_int_eq(ldns_wire2pkt(a, out, n), LDNS_STATUS_OK);
    return n;
}

START_TEST(test_answers)
{
    struct dnsmsg_ctx ctx;
    struct dnsmsg_result res;
    uint8_t b[512];
    ldns_pkt *a;
    size_t len;

    answer_ctx(&ctx, cases[_i].v4, cases[_i].v6);
    len = query(b, cases[_i].flags, 1, cases[_i].name, cases[_i].qtype, cases[_i].qclass);
    ck_assert_uint_gt(answer(b, len, &ctx, &res, &a), 0);
    ck_assert_msg(res.type == cases[_i].type && res.rcode == cases[_i].rcode,
                  "%s/%u: type %d rcode %d", cases[_i].name, cases[_i].qtype, res.type, res.rcode);
    ck_assert_uint_eq(ldns_pkt_id(a), 0x1234);
    ck_assert(ldns_pkt_qr(a));
    ck_assert_int_eq(ldns_pkt_get_opcode(a), (cases[_i].flags >> 11) & 15);
    ck_assert_int_eq(ldns_pkt_rd(a), (cases[_i].flags & 0x0100) != 0);
    ck_assert_uint_eq(ldns_pkt_nscount(a), 0);
    if (cases[_i].rdata == NULL) {
        ck_assert_uint_eq(ldns_pkt_ancount(a), 0);
    } else {
        ldns_rr *rr = ldns_rr_list_rr(ldns_pkt_answer(a), 0);
        char *text = ldns_rdf2str(ldns_rr_rdf(rr, 0)), *owner = ldns_rdf2str(ldns_rr_owner(rr));
        char want[300];

        ck_assert_uint_eq(ldns_pkt_ancount(a), 1);
        ck_assert_uint_eq(ldns_rr_ttl(rr), DNSMSG_TTL);
        ck_assert_uint_eq(ldns_rr_get_type(rr), cases[_i].qtype);
        ck_assert_str_eq(text, cases[_i].rdata);
        snprintf(want, sizeof(want), "%s.", cases[_i].name); /* the spelling asked */
        ck_assert_str_eq(owner, want);
        free(text);
        free(owner);
    }
    ldns_pkt_free(a);
}
END_TEST

/* Not answered at all: runts and responses. */
START_TEST(test_dropped)
{
    struct dnsmsg_ctx ctx;
    struct dnsmsg_result res;
    uint8_t b[512];
    ldns_pkt *a;
    size_t len = query(b, 0x8180, 1, "x.example.test", T_A, 1);

    answer_ctx(&ctx, 1, 1);
    ck_assert_uint_eq(answer(b, len, &ctx, &res, &a), 0);
    for (size_t n = 0; n < 12; n++)
        ck_assert_uint_eq(answer(b, n, &ctx, &res, &a), 0);
}
END_TEST

/* FORMERR, header only: unparseable, no question, two questions, a compression loop. */
START_TEST(test_formerr)
{
    static const uint8_t loop[] = {0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1};
    struct dnsmsg_ctx ctx;
    struct dnsmsg_result res;
    uint8_t b[512], second[64];
    ldns_pkt *a;
    size_t len, two;

    answer_ctx(&ctx, 1, 1);
    len = query(b, 0x0100, 1, "x.example.test", T_A, 1);
    for (size_t cut = 13; cut < len; cut++) { /* every truncation of the question */
        ck_assert_uint_gt(answer(b, cut, &ctx, &res, &a), 0);
        ck_assert_int_eq(res.rcode, DNSMSG_R_FORMERR);
        ck_assert_int_eq(ldns_pkt_get_rcode(a), LDNS_RCODE_FORMERR);
        ck_assert_uint_eq(ldns_pkt_ancount(a) + ldns_pkt_qdcount(a), 0);
        ldns_pkt_free(a);
    }
    len = query(b, 0x0100, 0, NULL, 0, 0);
    ck_assert_uint_gt(answer(b, len, &ctx, &res, &a), 0);
    ck_assert_int_eq(res.rcode, DNSMSG_R_FORMERR);
    ldns_pkt_free(a);
    len = query(b, 0x0100, 2, "a.test", T_A, 1);
    two = query(second, 0, 0, "b.test", T_A, 1) - 12; /* the second question alone */
    memcpy(b + len, second + 12, two);
    len += two;
    ck_assert_uint_gt(answer(b, len, &ctx, &res, &a), 0);
    ck_assert_int_eq(res.rcode, DNSMSG_R_FORMERR);
    ck_assert_uint_eq(ldns_pkt_ancount(a), 0);
    ldns_pkt_free(a);
    ck_assert_uint_gt(answer(loop, sizeof(loop), &ctx, &res, &a), 0);
    ck_assert_int_eq(res.rcode, DNSMSG_R_FORMERR);
    ldns_pkt_free(a);
}
END_TEST

START_TEST(test_names)
{
    ck_assert_str_eq(dnsmsg_type_name(DNSMSG_T_HTTPS), "HTTPS");
    ck_assert_str_eq(dnsmsg_type_name(DNSMSG_T_OTHER), "other");
    ck_assert_str_eq(dnsmsg_rcode_name(DNSMSG_R_NOTIMP), "notimp");
    ck_assert_str_eq(dnsmsg_rcode_name(DNSMSG_R_SERVFAIL), "servfail");
}
END_TEST

Suite *suite_dnsmsg(void);

Suite *suite_dnsmsg(void)
{
    Suite *s = suite_create("dnsmsg");
    TCase *tc = tcase_create("answers");

    tcase_add_loop_test(tc, test_answers, 0, sizeof(cases) / sizeof(cases[0]));
    tcase_add_test(tc, test_dropped);
    tcase_add_test(tc, test_formerr);
    tcase_add_test(tc, test_names);
    suite_add_tcase(s, tc);
    return s;
}
