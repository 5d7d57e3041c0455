/*
 * fuzz_addr.c - addr_classify, addr_parse_cidr and addr_in_cidr against a slow reference.
 *
 * Input: 16 bytes are an IPv6 address (and their first 4 an IPv4 address); 4 to 15 bytes are an
 * IPv4 address; a 17th byte, when present, is a prefix length. The reference below is written
 * differently on purpose: its ranges are CIDR strings parsed with inet_pton at start-up and
 * matched bit by bit, and embedded IPv4 is cross-checked through inet_ntop's text form. Any
 * disagreement aborts.
 */
#include "proxy/addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* clang-format off */
#define R(c, k) {.cidr = (c), .cls = (k)}
/* clang-format on */

struct ref_range {
    const char *cidr;
    enum addr_class cls;
    uint8_t net[16];
    unsigned bits;
    int v6;
};

/* Order matters (first match): exact hosts before the blocks that contain them. */
static struct ref_range ref_v4[] = {
    R("169.254.169.254/32", ADDR_METADATA), R("0.0.0.0/8", ADDR_UNSPECIFIED),
    R("10.0.0.0/8", ADDR_PRIVATE),          R("172.16.0.0/12", ADDR_PRIVATE),
    R("192.168.0.0/16", ADDR_PRIVATE),      R("100.64.0.0/10", ADDR_CGNAT),
    R("127.0.0.0/8", ADDR_LOOPBACK),        R("169.254.0.0/16", ADDR_LINKLOCAL),
    R("224.0.0.0/4", ADDR_MULTICAST),       R("240.0.0.0/4", ADDR_RESERVED),
    R("255.255.255.255/32", ADDR_RESERVED), R("192.0.0.0/24", ADDR_RESERVED),
    R("192.0.2.0/24", ADDR_RESERVED),       R("198.18.0.0/15", ADDR_RESERVED),
    R("198.51.100.0/24", ADDR_RESERVED),    R("203.0.113.0/24", ADDR_RESERVED),
};

static struct ref_range ref_v6[] = {
    R("fd00:ec2::254/128", ADDR_METADATA), R("fc00::/7", ADDR_PRIVATE),
    R("fe80::/10", ADDR_LINKLOCAL),        R("ff00::/8", ADDR_MULTICAST),
    R("2001::/32", ADDR_RESERVED),         R("2001:db8::/32", ADDR_RESERVED),
    R("3fff::/20", ADDR_RESERVED),         R("2001:2::/48", ADDR_RESERVED),
    R("100::/64", ADDR_RESERVED),
};

static struct ref_range emb_mapped = {.cidr = "::ffff:0:0/96"}, emb_compat = {.cidr = "::/96"},
                        emb_nat64 = {.cidr = "64:ff9b::/96"},
                        emb_nat64_local = {.cidr = "64:ff9b:1::/48"},
                        emb_6to4 = {.cidr = "2002::/16"}, global = {.cidr = "2000::/3"};

static void ref_parse(struct ref_range *r)
{
    char ip[64];
    const char *slash = strchr(r->cidr, '/');

    snprintf(ip, sizeof(ip), "%.*s", (int)(slash - r->cidr), r->cidr);
    r->bits = (unsigned)atoi(slash + 1);
    r->v6 = strchr(ip, ':') != NULL;
    if (inet_pton(r->v6 ? AF_INET6 : AF_INET, ip, r->net) != 1)
        abort();
}

static int bit(const uint8_t *a, unsigned i)
{
    return (a[i / 8] >> (7 - i % 8)) & 1;
}

static int ref_match(const uint8_t *a, const struct ref_range *r)
{
    for (unsigned i = 0; i < r->bits; i++) {
        if (bit(a, i) != bit(r->net, i))
            return 0;
    }
    return 1;
}

static enum addr_class ref_classify4(const uint8_t *a)
{
    for (size_t i = 0; i < sizeof(ref_v4) / sizeof(ref_v4[0]); i++) {
        if (ref_match(a, &ref_v4[i]))
            return ref_v4[i].cls;
    }
    return ADDR_PUBLIC;
}

static enum addr_class ref_classify6(const uint8_t *a)
{
    static const uint8_t zero[16], one[16] = {[15] = 1};
    enum addr_class c;

    if (memcmp(a, zero, 16) == 0)
        return ADDR_UNSPECIFIED;
    if (memcmp(a, one, 16) == 0)
        return ADDR_LOOPBACK;
    if (ref_match(a, &emb_mapped) || ref_match(a, &emb_compat) || ref_match(a, &emb_nat64))
        return ref_classify4(a + 12);
    if (ref_match(a, &emb_nat64_local)) {
        c = ref_classify4(a + 12);
        return c == ADDR_PUBLIC ? ADDR_PRIVATE : c;
    }
    if (ref_match(a, &emb_6to4))
        return ref_classify4(a + 2);
    for (size_t i = 0; i < sizeof(ref_v6) / sizeof(ref_v6[0]); i++) {
        if (ref_match(a, &ref_v6[i]))
            return ref_v6[i].cls;
    }
    return ref_match(a, &global) ? ADDR_PUBLIC : ADDR_RESERVED;
}

static void init_once(void)
{
    static int done;

    if (done)
        return;
    for (size_t i = 0; i < sizeof(ref_v4) / sizeof(ref_v4[0]); i++)
        ref_parse(&ref_v4[i]);
    for (size_t i = 0; i < sizeof(ref_v6) / sizeof(ref_v6[0]); i++)
        ref_parse(&ref_v6[i]);
    ref_parse(&emb_mapped);
    ref_parse(&emb_compat);
    ref_parse(&emb_nat64);
    ref_parse(&emb_nat64_local);
    ref_parse(&emb_6to4);
    ref_parse(&global);
    done = 1;
}

static void fail(const char *what, const uint8_t *a, size_t len, int got, int want)
{
    char text[INET6_ADDRSTRLEN];

    inet_ntop(len == 4 ? AF_INET : AF_INET6, a, text, sizeof(text));
    fprintf(stderr, "fuzz_addr: %s %s: got %d, want %d\n", what, text, got, want);
    abort();
}

/* inet_ntop writes IPv4-mapped addresses as ::ffff:a.b.c.d: an independent route to the v4. */
static void check_text_form(const uint8_t *a)
{
    char text[INET6_ADDRSTRLEN];
    uint8_t v4[4];

    inet_ntop(AF_INET6, a, text, sizeof(text));
    if (strncmp(text, "::ffff:", 7) == 0 && strchr(text, '.') != NULL) {
        if (inet_pton(AF_INET, text + 7, v4) != 1)
            abort();
        if (addr_classify(a, 16) != addr_classify(v4, 4))
            fail("mapped text form", a, 16, addr_classify(a, 16), addr_classify(v4, 4));
    }
}

/* The address's own CIDR (at prefix p) parses back from text and contains it; the address
 * with the last prefix bit flipped does not. */
static void check_cidr(const uint8_t *a, size_t len, unsigned p)
{
    char text[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN + 16];
    uint8_t net[16], other[16];
    struct addr_cidr c;

    p %= (unsigned)(len * 8 + 1);
    memcpy(net, a, len);
    for (unsigned i = p; i < len * 8; i++)
        net[i / 8] &= (uint8_t) ~(0x80 >> (i % 8));
    inet_ntop(len == 4 ? AF_INET : AF_INET6, net, text, sizeof(text));
    snprintf(s, sizeof(s), "%s/%u", text, p);
    if (addr_parse_cidr(s, &c) != 0 || c.len != len || c.prefix != p)
        fail("cidr parse", net, len, -1, (int)p);
    if (addr_in_cidr(a, len, &c) != 1)
        fail("cidr contains", a, len, 0, 1);
    if (p > 0) {
        memcpy(other, a, len);
        other[(p - 1) / 8] ^= (uint8_t)(0x80 >> ((p - 1) % 8));
        if (addr_in_cidr(other, len, &c) != 0)
            fail("cidr excludes", other, len, 1, 0);
    }
    /* Host bits set: refused. */
    if (p < len * 8 && memcmp(net, a, len) != 0) {
        inet_ntop(len == 4 ? AF_INET : AF_INET6, a, text, sizeof(text));
        snprintf(s, sizeof(s), "%s/%u", text, p);
        if (addr_parse_cidr(s, &c) == 0)
            fail("cidr host bits", a, len, 0, -1);
    }
}

/* Every embedding of a v4 address classifies like the v4 address itself. */
static void check_embeddings(const uint8_t *v4)
{
    uint8_t a[16];
    enum addr_class c4 = ref_classify4(v4);

    memset(a, 0, 16);
    a[10] = a[11] = 0xFF;
    memcpy(a + 12, v4, 4);
    if (addr_classify(a, 16) != c4)
        fail("mapped", a, 16, addr_classify(a, 16), c4);
    memset(a, 0, 16);
    a[1] = 0x64;
    a[2] = 0xFF;
    a[3] = 0x9B;
    memcpy(a + 12, v4, 4);
    if (addr_classify(a, 16) != c4)
        fail("nat64", a, 16, addr_classify(a, 16), c4);
    memset(a, 0xAB, 16);
    a[0] = 0x20;
    a[1] = 0x02;
    memcpy(a + 2, v4, 4);
    if (addr_classify(a, 16) != c4)
        fail("6to4", a, 16, addr_classify(a, 16), c4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned p = size > 16 ? data[16] : (size > 4 ? data[4] : 0);
    enum addr_class got, want;

    init_once();
    if (size < 4)
        return 0;
    got = addr_classify(data, 4);
    want = ref_classify4(data);
    if (got != want)
        fail("classify v4", data, 4, got, want);
    if (got > ADDR_RESERVED || addr_class_name(got) == NULL)
        abort();
    check_embeddings(data);
    check_cidr(data, 4, p);
    if (size < 16)
        return 0;
    got = addr_classify(data, 16);
    want = ref_classify6(data);
    if (got != want)
        fail("classify v6", data, 16, got, want);
    check_text_form(data);
    check_cidr(data, 16, p);
    return 0;
}
