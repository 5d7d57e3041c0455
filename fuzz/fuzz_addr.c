/*
 * fuzz_addr.c - addr_classify, addr_block_of, addr_parse_cidr and addr_in_cidr against a slow
 * reference.
 *
 * Input: 16 bytes are an IPv6 address (and their first 4 an IPv4 address); 4 to 15 bytes are an
 * IPv4 address; a 17th byte, when present, is a prefix length. The reference below is written
 * differently on purpose: the registries' rows are CIDR strings parsed with inet_pton at
 * start-up, the most specific row is found by comparing bit by bit, embedded IPv4 addresses are
 * read bit by bit from bit positions (and the mapped form cross-checked through inet_ntop's text
 * form), and the "Globally Reachable" column is a string as the registries print it. Any
 * disagreement aborts.
 */
#include "proxy/addr.h"
#include "common/hostname.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* How a row carries an IPv4 address: none, or at which bits. */
enum ref_embed { E_NONE, E_LAST32, E_6TO4, E_RFC6052_48 };

/* clang-format off */
#define R(c, k, g) {.cidr = (c), .cls = (k), .global = (g), .embed = E_NONE}
#define RE(c, k, g, e) {.cidr = (c), .cls = (k), .global = (g), .embed = (e)}
/* clang-format on */

struct ref_range {
    const char *cidr;
    enum addr_class cls; /* when refused */
    const char *global;  /* the registry's "Globally Reachable": "True", "False", "N/A", "" */
    enum ref_embed embed;
    uint8_t net[16];
    unsigned bits;
    int v6;
};

/* The most specific row wins, whatever the order. */
static struct ref_range ref_v4[] = {
    R("0.0.0.0/8", ADDR_UNSPECIFIED, "False"),
    R("0.0.0.0/32", ADDR_UNSPECIFIED, "False"),
    R("10.0.0.0/8", ADDR_PRIVATE, "False"),
    R("100.64.0.0/10", ADDR_CGNAT, "False"),
    R("127.0.0.0/8", ADDR_LOOPBACK, "False"),
    R("169.254.0.0/16", ADDR_LINKLOCAL, "False"),
    R("169.254.169.254/32", ADDR_METADATA, "False"),
    R("172.16.0.0/12", ADDR_PRIVATE, "False"),
    R("192.0.0.0/24", ADDR_RESERVED, "False"),
    R("192.0.0.0/29", ADDR_RESERVED, "False"),
    R("192.0.0.8/32", ADDR_RESERVED, "False"),
    R("192.0.0.9/32", ADDR_RESERVED, "True"),
    R("192.0.0.10/32", ADDR_RESERVED, "True"),
    R("192.0.0.170/32", ADDR_RESERVED, "False"),
    R("192.0.0.171/32", ADDR_RESERVED, "False"),
    R("192.0.2.0/24", ADDR_RESERVED, "False"),
    R("192.31.196.0/24", ADDR_RESERVED, "True"),
    R("192.52.193.0/24", ADDR_RESERVED, "True"),
    R("192.88.99.0/24", ADDR_RESERVED, ""),
    R("192.88.99.2/32", ADDR_RESERVED, "False"),
    R("192.168.0.0/16", ADDR_PRIVATE, "False"),
    R("192.175.48.0/24", ADDR_RESERVED, "True"),
    R("198.18.0.0/15", ADDR_RESERVED, "False"),
    R("198.51.100.0/24", ADDR_RESERVED, "False"),
    R("203.0.113.0/24", ADDR_RESERVED, "False"),
    R("224.0.0.0/4", ADDR_MULTICAST, "False"),
    R("240.0.0.0/4", ADDR_RESERVED, "False"),
    R("255.255.255.255/32", ADDR_RESERVED, "False"),
};

static struct ref_range ref_v6[] = {
    R("::/0", ADDR_RESERVED, "False"),
    R("2000::/3", ADDR_RESERVED, "True"),
    R("::/128", ADDR_UNSPECIFIED, "False"),
    R("::1/128", ADDR_LOOPBACK, "False"),
    RE("::/96", ADDR_RESERVED, "False", E_LAST32),
    RE("::ffff:0:0/96", ADDR_RESERVED, "as IPv4", E_LAST32),
    RE("64:ff9b::/96", ADDR_RESERVED, "True", E_LAST32),
    RE("64:ff9b:1::/48", ADDR_PRIVATE, "False", E_RFC6052_48),
    R("100::/64", ADDR_RESERVED, "False"),
    R("100:0:0:1::/64", ADDR_RESERVED, "False"),
    R("2001::/23", ADDR_RESERVED, "False"),
    R("2001::/32", ADDR_RESERVED, "N/A"),
    R("2001:1::1/128", ADDR_RESERVED, "True"),
    R("2001:1::2/128", ADDR_RESERVED, "True"),
    R("2001:1::3/128", ADDR_RESERVED, "True"),
    R("2001:2::/48", ADDR_RESERVED, "False"),
    R("2001:3::/32", ADDR_RESERVED, "True"),
    R("2001:4:112::/48", ADDR_RESERVED, "True"),
    R("2001:10::/28", ADDR_RESERVED, ""),
    R("2001:20::/28", ADDR_RESERVED, "True"),
    R("2001:30::/28", ADDR_RESERVED, "True"),
    R("2001:db8::/32", ADDR_RESERVED, "False"),
    RE("2002::/16", ADDR_RESERVED, "N/A", E_6TO4),
    R("2620:4f:8000::/48", ADDR_RESERVED, "True"),
    R("3fff::/20", ADDR_RESERVED, "False"),
    R("5f00::/16", ADDR_RESERVED, "False"),
    R("fc00::/7", ADDR_PRIVATE, "False"),
    R("fd00:ec2::254/128", ADDR_METADATA, "False"),
    R("fe80::/10", ADDR_LINKLOCAL, "False"),
    R("fec0::/10", ADDR_RESERVED, "False"),
    R("ff00::/8", ADDR_MULTICAST, "False"),
};

#define NV4 (sizeof(ref_v4) / sizeof(ref_v4[0]))
#define NV6 (sizeof(ref_v6) / sizeof(ref_v6[0]))

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

static const struct ref_range *ref_best(const uint8_t *a, struct ref_range *rows, size_t n)
{
    const struct ref_range *best = NULL;

    for (size_t i = 0; i < n; i++) {
        if (ref_match(a, &rows[i]) && (best == NULL || rows[i].bits > best->bits))
            best = &rows[i];
    }
    return best;
}

static enum addr_class ref_verdict(const struct ref_range *r)
{
    return strcmp(r->global, "True") == 0 ? ADDR_PUBLIC : r->cls;
}

static enum addr_class ref_classify4(const uint8_t *a)
{
    const struct ref_range *r = ref_best(a, ref_v4, NV4);

    return r == NULL ? ADDR_PUBLIC : ref_verdict(r);
}

/* n bits of a from bit `from`, most significant first, into v4 (32 bits, network order). */
static void take_bits(const uint8_t *a, unsigned from, unsigned n, uint8_t *v4, unsigned *at)
{
    for (unsigned i = 0; i < n; i++, (*at)++) {
        if (bit(a, from + i))
            v4[*at / 8] |= (uint8_t)(0x80 >> (*at % 8));
    }
}

static enum addr_class ref_classify6(const uint8_t *a)
{
    const struct ref_range *r = ref_best(a, ref_v6, NV6);
    uint8_t v4[4] = {0};
    unsigned at = 0;
    enum addr_class c4;

    if (r->embed == E_NONE)
        return ref_verdict(r);
    if (r->embed == E_LAST32) {
        take_bits(a, 96, 32, v4, &at);
    } else if (r->embed == E_6TO4) {
        take_bits(a, 16, 32, v4, &at);
    } else {
        take_bits(a, 48, 16, v4, &at);
        take_bits(a, 72, 16, v4, &at);
    }
    c4 = ref_classify4(v4);
    if (c4 != ADDR_PUBLIC)
        return c4;
    return strcmp(r->global, "True") == 0 || strcmp(r->global, "as IPv4") == 0 ? ADDR_PUBLIC
                                                                               : r->cls;
}

static void init_once(void)
{
    static int done;

    if (done)
        return;
    for (size_t i = 0; i < NV4; i++)
        ref_parse(&ref_v4[i]);
    for (size_t i = 0; i < NV6; i++)
        ref_parse(&ref_v6[i]);
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

/* The class of an embedding of v4 whose own row answers `refused` for a public v4. */
static enum addr_class embedded_class(enum addr_class c4, enum addr_class refused)
{
    return c4 != ADDR_PUBLIC ? c4 : refused;
}

/* Every embedding of a v4 address classifies by the v4 address, as its row says. */
static void check_embeddings(const uint8_t *v4)
{
    uint8_t a[16];
    enum addr_class c4 = ref_classify4(v4), want;
    uint32_t n = (uint32_t)v4[0] << 24 | (uint32_t)v4[1] << 16 | (uint32_t)v4[2] << 8 | v4[3];

    memset(a, 0, 16);
    a[10] = a[11] = 0xFF;
    memcpy(a + 12, v4, 4);
    if (addr_classify(a, 16) != c4)
        fail("mapped", a, 16, addr_classify(a, 16), c4);
    memset(a, 0, 16);
    memcpy(a + 12, v4, 4);
    want = n <= 1 ? (n == 0 ? ADDR_UNSPECIFIED : ADDR_LOOPBACK) /* :: and ::1 */
                  : embedded_class(c4, ADDR_RESERVED);
    if (addr_classify(a, 16) != want)
        fail("compatible", a, 16, addr_classify(a, 16), want);
    memset(a, 0, 16);
    a[1] = 0x64;
    a[2] = 0xFF;
    a[3] = 0x9B;
    memcpy(a + 12, v4, 4);
    if (addr_classify(a, 16) != c4)
        fail("nat64", a, 16, addr_classify(a, 16), c4);
    memset(a, 0x5A, 16);
    memcpy(a, "\x00\x64\xff\x9b\x00\x01", 6);
    a[6] = v4[0];
    a[7] = v4[1];
    a[9] = v4[2];
    a[10] = v4[3];
    want = embedded_class(c4, ADDR_PRIVATE);
    if (addr_classify(a, 16) != want)
        fail("nat64 local", a, 16, addr_classify(a, 16), want);
    memset(a, 0xAB, 16);
    a[0] = 0x20;
    a[1] = 0x02;
    memcpy(a + 2, v4, 4);
    want = embedded_class(c4, ADDR_RESERVED);
    if (addr_classify(a, 16) != want)
        fail("6to4", a, 16, addr_classify(a, 16), want);
}

/* addr_block_of names the reference's most specific row, and its embedding flag agrees with
 * common/hostname.c, which maps the same forms when it normalises a host. */
static void check_block(const uint8_t *a, size_t len)
{
    const struct addr_block *b = addr_block_of(a, len);
    const struct ref_range *r = len == 4 ? ref_best(a, ref_v4, NV4) : ref_best(a, ref_v6, NV6);
    uint8_t v4[4];

    if ((b == NULL) != (r == NULL))
        fail("block", a, len, b != NULL, r != NULL);
    if (b == NULL)
        return;
    if (b->prefix != r->bits || memcmp(b->net, r->net, len) != 0)
        fail("block prefix", a, len, b->prefix, (int)r->bits);
    if (len == 16 && b->embeds_v4 != (hostname_v4_embedded(a, v4) != HOSTNAME_V4_NONE))
        fail("block embeds", a, len, b->embeds_v4, !b->embeds_v4);
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
    check_block(data, 4);
    check_cidr(data, 4, p);
    if (size < 16)
        return 0;
    got = addr_classify(data, 16);
    want = ref_classify6(data);
    if (got != want)
        fail("classify v6", data, 16, got, want);
    check_text_form(data);
    check_block(data, 16);
    check_cidr(data, 16, p);
    return 0;
}
