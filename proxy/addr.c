/*
 * addr.c - the destination address rules of SPEC §4: which addresses vaultgate refuses to dial.
 *
 * Guarantees: pure functions over 4- or 16-byte addresses in network byte order, no I/O, no
 * allocation. Every IPv6 form that carries an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64,
 * 6to4) is classified by that IPv4 address, so ::ffff:127.0.0.1 is loopback. IPv6 outside the
 * global unicast block 2000::/3 that no other rule names is reserved: nothing there is routable
 * on the internet today (this catches the deprecated site-local fec0::/10 among others).
 */
#include "proxy/addr.h"

#include <arpa/inet.h>
#include <string.h>

struct v4_range {
    uint32_t net;
    unsigned prefix;
    enum addr_class cls;
};

/* First match wins: the metadata host comes before the link-local block that contains it. */
static const struct v4_range v4_ranges[] = {
    {0xA9FEA9FEu, 32, ADDR_METADATA},   /* 169.254.169.254 */
    {0x00000000u, 8, ADDR_UNSPECIFIED}, /* 0.0.0.0/8 "this network" */
    {0x0A000000u, 8, ADDR_PRIVATE},     /* 10/8 */
    {0x64400000u, 10, ADDR_CGNAT},      /* 100.64/10 */
    {0x7F000000u, 8, ADDR_LOOPBACK},    /* 127/8 */
    {0xA9FE0000u, 16, ADDR_LINKLOCAL},  /* 169.254/16 */
    {0xAC100000u, 12, ADDR_PRIVATE},    /* 172.16/12 */
    {0xC0000000u, 24, ADDR_RESERVED},   /* 192.0.0/24 IETF protocol assignments */
    {0xC0000200u, 24, ADDR_RESERVED},   /* 192.0.2/24 TEST-NET-1 */
    {0xC0A80000u, 16, ADDR_PRIVATE},    /* 192.168/16 */
    {0xC6120000u, 15, ADDR_RESERVED},   /* 198.18/15 benchmarking */
    {0xC6336400u, 24, ADDR_RESERVED},   /* 198.51.100/24 TEST-NET-2 */
    {0xCB007100u, 24, ADDR_RESERVED},   /* 203.0.113/24 TEST-NET-3 */
    {0xE0000000u, 4, ADDR_MULTICAST},   /* 224/4 */
    {0xF0000000u, 4, ADDR_RESERVED},    /* 240/4 and 255.255.255.255 */
};

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static enum addr_class classify_v4(uint32_t a)
{
    for (size_t i = 0; i < sizeof(v4_ranges) / sizeof(v4_ranges[0]); i++) {
        uint32_t mask = v4_ranges[i].prefix == 0 ? 0 : ~0u << (32 - v4_ranges[i].prefix);

        if ((a & mask) == v4_ranges[i].net)
            return v4_ranges[i].cls;
    }
    return ADDR_PUBLIC;
}

/* 1 if the first `bits` bits of a equal those of p (p given as 16 bytes). */
static int v6_prefix(const uint8_t *a, const uint8_t *p, unsigned bits)
{
    unsigned bytes = bits / 8, rest = bits % 8;

    if (memcmp(a, p, bytes) != 0)
        return 0;
    if (rest == 0)
        return 1;
    return ((a[bytes] ^ p[bytes]) & (uint8_t)(0xFF << (8 - rest))) == 0;
}

static const uint8_t v6_mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
static const uint8_t v6_zero[16] = {0};
static const uint8_t v6_nat64[16] = {0x00, 0x64, 0xFF, 0x9B};
static const uint8_t v6_nat64_local[16] = {0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01};
static const uint8_t v6_6to4[16] = {0x20, 0x02};
static const uint8_t v6_teredo[16] = {0x20, 0x01, 0x00, 0x00};
static const uint8_t v6_doc[16] = {0x20, 0x01, 0x0D, 0xB8};
static const uint8_t v6_doc2[16] = {0x3F, 0xFF};                    /* 3fff::/20, RFC 9637 */
static const uint8_t v6_bench[16] = {0x20, 0x01, 0x00, 0x02, 0, 0}; /* 2001:2::/48 */
static const uint8_t v6_discard[16] = {0x01, 0x00};
static const uint8_t v6_metadata[16] = {0xFD, 0x00, 0x0E, 0xC2, 0, 0, 0,    0,
                                        0,    0,    0,    0,    0, 0, 0x02, 0x54};

static enum addr_class classify_v6(const uint8_t *a)
{
    enum addr_class c;

    if (memcmp(a, v6_zero, 16) == 0)
        return ADDR_UNSPECIFIED;
    if (memcmp(a, v6_zero, 15) == 0 && a[15] == 1)
        return ADDR_LOOPBACK;
    if (v6_prefix(a, v6_mapped, 96) || v6_prefix(a, v6_zero, 96) || v6_prefix(a, v6_nat64, 96))
        return classify_v4(load32(a + 12));
    if (v6_prefix(a, v6_nat64_local, 48)) {
        /* Local-use NAT64 (RFC 8215) reaches only the site's translator: never public. */
        c = classify_v4(load32(a + 12));
        return c == ADDR_PUBLIC ? ADDR_PRIVATE : c;
    }
    if (v6_prefix(a, v6_6to4, 16))
        return classify_v4(load32(a + 2));
    if (memcmp(a, v6_metadata, 16) == 0)
        return ADDR_METADATA;
    if ((a[0] & 0xFE) == 0xFC)
        return ADDR_PRIVATE;
    if (a[0] == 0xFE && (a[1] & 0xC0) == 0x80)
        return ADDR_LINKLOCAL;
    if (a[0] == 0xFF)
        return ADDR_MULTICAST;
    if (v6_prefix(a, v6_teredo, 32) || v6_prefix(a, v6_doc, 32) || v6_prefix(a, v6_doc2, 20) ||
        v6_prefix(a, v6_bench, 48) || v6_prefix(a, v6_discard, 64))
        return ADDR_RESERVED;
    if ((a[0] & 0xE0) != 0x20)
        return ADDR_RESERVED;
    return ADDR_PUBLIC;
}

enum addr_class addr_classify(const uint8_t *addr, size_t len)
{
    if (len == 4)
        return classify_v4(load32(addr));
    if (len == 16)
        return classify_v6(addr);
    return ADDR_RESERVED;
}

const char *addr_class_name(enum addr_class c)
{
    switch (c) {
    case ADDR_PUBLIC:
        return "public";
    case ADDR_PRIVATE:
        return "private";
    case ADDR_LOOPBACK:
        return "loopback";
    case ADDR_LINKLOCAL:
        return "link-local";
    case ADDR_CGNAT:
        return "cgnat";
    case ADDR_MULTICAST:
        return "multicast";
    case ADDR_UNSPECIFIED:
        return "unspecified";
    case ADDR_METADATA:
        return "metadata";
    case ADDR_RESERVED:
        return "reserved";
    }
    return "unknown";
}

/* Strict decimal 0..max without sign, spaces or leading zeros. */
static int parse_prefix(const char *s, unsigned max, unsigned *out)
{
    unsigned v = 0;

    if (*s == '\0' || (s[0] == '0' && s[1] != '\0'))
        return -1;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (unsigned)(*s - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

static int host_bits_clear(const uint8_t *a, size_t len, unsigned prefix)
{
    for (size_t bit = prefix; bit < len * 8; bit++) {
        if (a[bit / 8] & (0x80 >> (bit % 8)))
            return 0;
    }
    return 1;
}

int addr_parse_cidr(const char *s, struct addr_cidr *out)
{
    char ip[INET6_ADDRSTRLEN];
    const char *slash = strchr(s, '/');
    size_t iplen = slash != NULL ? (size_t)(slash - s) : strlen(s);
    struct addr_cidr c;

    memset(&c, 0, sizeof(c));
    if (iplen == 0 || iplen >= sizeof(ip))
        return -1;
    memcpy(ip, s, iplen);
    ip[iplen] = '\0';
    if (inet_pton(AF_INET, ip, c.addr) == 1)
        c.len = 4;
    else if (inet_pton(AF_INET6, ip, c.addr) == 1)
        c.len = 16;
    else
        return -1;
    c.prefix = (unsigned)c.len * 8;
    if (slash != NULL && parse_prefix(slash + 1, c.prefix, &c.prefix) != 0)
        return -1;
    /* 10.1.2.3/8 is refused rather than silently widened: it is most likely a typo. */
    if (!host_bits_clear(c.addr, c.len, c.prefix))
        return -1;
    *out = c;
    return 0;
}

int addr_in_cidr(const uint8_t *addr, size_t len, const struct addr_cidr *c)
{
    uint8_t tmp[16];

    if (len == 16 && c->len == 4 && v6_prefix(addr, v6_mapped, 96)) {
        addr += 12;
        len = 4;
    } else if (len == 4 && c->len == 16) {
        memcpy(tmp, v6_mapped, 12);
        memcpy(tmp + 12, addr, 4);
        addr = tmp;
        len = 16;
    }
    if (len != c->len)
        return 0;
    return v6_prefix(addr, c->addr, c->prefix);
}
