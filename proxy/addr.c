/*
 * addr.c - the destination address rules of SPEC §4: which addresses vaultgate refuses to dial.
 *
 * Guarantees: pure functions over 4- or 16-byte addresses in network byte order, no I/O, no
 * allocation. An address is classified by the most specific block of ONE table, blocks[] below,
 * which is the IANA special-purpose registries row by row plus the few blocks vaultgate adds
 * (cloud metadata hosts, multicast, the IPv6 space outside 2000::/3). A block is refused unless
 * its registry row says "Globally Reachable: True"; "N/A" and blank are refused. Every IPv6 form
 * that carries an IPv4 address is refused with the class of that IPv4 address when it is not
 * public, so ::ffff:127.0.0.1 and 64:ff9b::a9fe:a9fe are loopback and metadata.
 */
#include "proxy/addr.h"
#include "common/hostname.h"

#include <arpa/inet.h>
#include <string.h>

/* clang-format off */
#define V4(a, b, c, d, p) 4, p, {a, b, c, d}
#define V6(a, b, c, d, e, f, g, h, p)                                                            \
    16, p, {(a) >> 8, (a) & 0xFF, (b) >> 8, (b) & 0xFF, (c) >> 8, (c) & 0xFF, (d) >> 8,          \
            (d) & 0xFF, (e) >> 8, (e) & 0xFF, (f) >> 8, (f) & 0xFF, (g) >> 8, (g) & 0xFF,        \
            (h) >> 8, (h) & 0xFF}
#define F ADDR_REACH_FALSE
#define T ADDR_REACH_TRUE
#define NA ADDR_REACH_NA

/*
 * Sources, the versions this table follows:
 * - IANA IPv4 Special-Purpose Address Registry (RFC 6890, RFC 8190), all 25 rows as published
 *   since its last change (the newest allocation 192.0.0.10/32 of 2017-02, the NAT64/DNS64
 *   discovery row citing RFC 8880 of 2020; that row's two addresses are two rows here);
 * - IANA IPv6 Special-Purpose Address Registry (RFC 6890, RFC 8190), all 25 rows up to the
 *   2025-04 allocation of 100:0:0:1::/64 (RFC 9780), with 2001:1::3/128 (RFC 9665, 2024-04),
 *   5f00::/16 (RFC 9602, 2024-04) and 3fff::/20 (RFC 9637, 2024-07);
 * - the IPv4 and IPv6 Address Space registries for multicast, global unicast (2000::/3), the
 *   deprecated site-local block and the rest of the IPv6 space ("Reserved by IETF");
 * - vaultgate's own rows: the cloud metadata hosts and IPv4-compatible ::/96, which the
 *   registries do not list.
 * A row is found by longest prefix, so a host row (192.0.0.9/32) overrides its block
 * (192.0.0.0/24) whichever way the registry answers for each. The reach column is the registry's
 * "Globally Reachable" as written there; cls is ADDR_PUBLIC exactly for the rows it makes
 * reachable (tests/unit/test_addr.c checks both, and one address inside and just outside each
 * row).
 */
static const struct addr_block blocks[] = {
    /* IANA IPv4 Special-Purpose Address Registry */
    {V4(0, 0, 0, 0, 8), ADDR_UNSPECIFIED, F, false, "\"This network\" (RFC 791)"},
    {V4(0, 0, 0, 0, 32), ADDR_UNSPECIFIED, F, false, "\"This host on this network\" (RFC 1122)"},
    {V4(10, 0, 0, 0, 8), ADDR_PRIVATE, F, false, "Private-Use (RFC 1918)"},
    {V4(100, 64, 0, 0, 10), ADDR_CGNAT, F, false, "Shared Address Space (RFC 6598)"},
    {V4(127, 0, 0, 0, 8), ADDR_LOOPBACK, F, false, "Loopback (RFC 1122)"},
    {V4(169, 254, 0, 0, 16), ADDR_LINKLOCAL, F, false, "Link Local (RFC 3927)"},
    {V4(172, 16, 0, 0, 12), ADDR_PRIVATE, F, false, "Private-Use (RFC 1918)"},
    {V4(192, 0, 0, 0, 24), ADDR_RESERVED, F, false, "IETF Protocol Assignments (RFC 6890)"},
    {V4(192, 0, 0, 0, 29), ADDR_RESERVED, F, false, "IPv4 Service Continuity Prefix (RFC 7335)"},
    {V4(192, 0, 0, 8, 32), ADDR_RESERVED, F, false, "IPv4 dummy address (RFC 7600)"},
    {V4(192, 0, 0, 9, 32), ADDR_PUBLIC, T, false, "Port Control Protocol Anycast (RFC 7723)"},
    {V4(192, 0, 0, 10, 32), ADDR_PUBLIC, T, false,
     "Traversal Using Relays around NAT Anycast (RFC 8155)"},
    {V4(192, 0, 0, 170, 32), ADDR_RESERVED, F, false, "NAT64/DNS64 Discovery (RFC 8880, RFC 7050)"},
    {V4(192, 0, 0, 171, 32), ADDR_RESERVED, F, false, "NAT64/DNS64 Discovery (RFC 8880, RFC 7050)"},
    {V4(192, 0, 2, 0, 24), ADDR_RESERVED, F, false, "Documentation (TEST-NET-1) (RFC 5737)"},
    {V4(192, 31, 196, 0, 24), ADDR_PUBLIC, T, false, "AS112-v4 (RFC 7535)"},
    {V4(192, 52, 193, 0, 24), ADDR_PUBLIC, T, false, "AMT (RFC 7450)"},
    {V4(192, 88, 99, 0, 24), ADDR_RESERVED, NA, false,
     "Deprecated (6to4 Relay Anycast) (RFC 7526), terminated 2015-03, reachability left blank"},
    {V4(192, 88, 99, 2, 32), ADDR_RESERVED, F, false, "6a44-relay anycast address (RFC 6751)"},
    {V4(192, 168, 0, 0, 16), ADDR_PRIVATE, F, false, "Private-Use (RFC 1918)"},
    {V4(192, 175, 48, 0, 24), ADDR_PUBLIC, T, false, "Direct Delegation AS112 Service (RFC 7534)"},
    {V4(198, 18, 0, 0, 15), ADDR_RESERVED, F, false, "Benchmarking (RFC 2544)"},
    {V4(198, 51, 100, 0, 24), ADDR_RESERVED, F, false, "Documentation (TEST-NET-2) (RFC 5737)"},
    {V4(203, 0, 113, 0, 24), ADDR_RESERVED, F, false, "Documentation (TEST-NET-3) (RFC 5737)"},
    {V4(240, 0, 0, 0, 4), ADDR_RESERVED, F, false, "Reserved (RFC 1112)"},
    {V4(255, 255, 255, 255, 32), ADDR_RESERVED, F, false, "Limited Broadcast (RFC 8190, RFC 919)"},
    /* IPv4 Address Space registry */
    {V4(224, 0, 0, 0, 4), ADDR_MULTICAST, F, false, "Multicast (RFC 5771)"},
    /* vaultgate: the instance metadata service of the large clouds */
    {V4(169, 254, 169, 254, 32), ADDR_METADATA, F, false, "cloud instance metadata"},

    /* IPv6 Address Space registry: all but 2000::/3 and the blocks below is Reserved by IETF */
    {V6(0, 0, 0, 0, 0, 0, 0, 0, 0), ADDR_RESERVED, F, false, "Reserved by IETF (RFC 4291)"},
    {V6(0x2000, 0, 0, 0, 0, 0, 0, 0, 3), ADDR_PUBLIC, T, false, "Global Unicast (RFC 4291)"},
    {V6(0xfec0, 0, 0, 0, 0, 0, 0, 0, 10), ADDR_RESERVED, F, false,
     "Site-Local, deprecated (RFC 3879)"},
    {V6(0xff00, 0, 0, 0, 0, 0, 0, 0, 8), ADDR_MULTICAST, F, false, "Multicast (RFC 4291)"},
    /* IANA IPv6 Special-Purpose Address Registry */
    {V6(0, 0, 0, 0, 0, 0, 0, 0, 128), ADDR_UNSPECIFIED, F, false, "Unspecified Address (RFC 4291)"},
    {V6(0, 0, 0, 0, 0, 0, 0, 1, 128), ADDR_LOOPBACK, F, false, "Loopback Address (RFC 4291)"},
    /* Registry: not globally reachable as an IPv6 destination; but no packet ever has one: a
     * socket given ::ffff:a.b.c.d sends IPv4 to a.b.c.d, so the IPv4 rows decide. */
    {V6(0, 0, 0, 0, 0, 0xffff, 0, 0, 96), ADDR_RESERVED, ADDR_REACH_IPV4, true,
     "IPv4-mapped Address (RFC 4291)"},
    {V6(0x64, 0xff9b, 0, 0, 0, 0, 0, 0, 96), ADDR_PUBLIC, T, true,
     "IPv4-IPv6 Translat. (RFC 6052)"},
    {V6(0x64, 0xff9b, 1, 0, 0, 0, 0, 0, 48), ADDR_PRIVATE, F, true,
     "IPv4-IPv6 Translat. (RFC 8215)"},
    {V6(0x100, 0, 0, 0, 0, 0, 0, 0, 64), ADDR_RESERVED, F, false,
     "Discard-Only Address Block (RFC 6666)"},
    {V6(0x100, 0, 0, 1, 0, 0, 0, 0, 64), ADDR_RESERVED, F, false, "Dummy IPv6 Prefix (RFC 9780)"},
    {V6(0x2001, 0, 0, 0, 0, 0, 0, 0, 23), ADDR_RESERVED, F, false,
     "IETF Protocol Assignments (RFC 2928)"},
    {V6(0x2001, 0, 0, 0, 0, 0, 0, 0, 32), ADDR_RESERVED, NA, false, "TEREDO (RFC 4380, RFC 8190)"},
    {V6(0x2001, 1, 0, 0, 0, 0, 0, 1, 128), ADDR_PUBLIC, T, false,
     "Port Control Protocol Anycast (RFC 7723)"},
    {V6(0x2001, 1, 0, 0, 0, 0, 0, 2, 128), ADDR_PUBLIC, T, false,
     "Traversal Using Relays around NAT Anycast (RFC 8155)"},
    {V6(0x2001, 1, 0, 0, 0, 0, 0, 3, 128), ADDR_PUBLIC, T, false,
     "DNS-SD Service Registration Protocol Anycast (RFC 9665)"},
    {V6(0x2001, 2, 0, 0, 0, 0, 0, 0, 48), ADDR_RESERVED, F, false, "Benchmarking (RFC 5180)"},
    {V6(0x2001, 3, 0, 0, 0, 0, 0, 0, 32), ADDR_PUBLIC, T, false, "AMT (RFC 7450)"},
    {V6(0x2001, 4, 0x112, 0, 0, 0, 0, 0, 48), ADDR_PUBLIC, T, false, "AS112-v6 (RFC 7535)"},
    {V6(0x2001, 0x10, 0, 0, 0, 0, 0, 0, 28), ADDR_RESERVED, NA, false,
     "Deprecated (previously ORCHID) (RFC 4843)"},
    {V6(0x2001, 0x20, 0, 0, 0, 0, 0, 0, 28), ADDR_PUBLIC, T, false, "ORCHIDv2 (RFC 7343)"},
    {V6(0x2001, 0x30, 0, 0, 0, 0, 0, 0, 28), ADDR_PUBLIC, T, false,
     "Drone Remote ID Protocol Entity Tags (DETs) Prefix (RFC 9374)"},
    {V6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0, 32), ADDR_RESERVED, F, false, "Documentation (RFC 3849)"},
    {V6(0x2002, 0, 0, 0, 0, 0, 0, 0, 16), ADDR_RESERVED, NA, true, "6to4 (RFC 3056)"},
    {V6(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0, 48), ADDR_PUBLIC, T, false,
     "Direct Delegation AS112 Service (RFC 7534)"},
    {V6(0x3fff, 0, 0, 0, 0, 0, 0, 0, 20), ADDR_RESERVED, F, false, "Documentation (RFC 9637)"},
    {V6(0x5f00, 0, 0, 0, 0, 0, 0, 0, 16), ADDR_RESERVED, F, false,
     "Segment Routing (SRv6) SIDs (RFC 9602)"},
    {V6(0xfc00, 0, 0, 0, 0, 0, 0, 0, 7), ADDR_PRIVATE, F, false, "Unique-Local (RFC 4193, RFC 8190)"},
    {V6(0xfe80, 0, 0, 0, 0, 0, 0, 0, 10), ADDR_LINKLOCAL, F, false, "Link-Local Unicast (RFC 4291)"},
    /* vaultgate: IPv4-compatible addresses (deprecated, RFC 4291 §2.5.5.1) sit in ::/8, and
     * the AWS instance metadata service's IPv6 address */
    {V6(0, 0, 0, 0, 0, 0, 0, 0, 96), ADDR_RESERVED, F, true, "IPv4-compatible (RFC 4291)"},
    {V6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254, 128), ADDR_METADATA, F, false,
     "cloud instance metadata"},
};
/* clang-format on */
#undef V4
#undef V6
#undef F
#undef T
#undef NA

#define NBLOCKS (sizeof(blocks) / sizeof(blocks[0]))

/* 1 if the first `bits` bits of a equal those of p. */
static int prefix_eq(const uint8_t *a, const uint8_t *p, unsigned bits)
{
    unsigned bytes = bits / 8, rest = bits % 8;

    if (memcmp(a, p, bytes) != 0)
        return 0;
    if (rest == 0)
        return 1;
    return ((a[bytes] ^ p[bytes]) & (uint8_t)(0xFF << (8 - rest))) == 0;
}

const struct addr_block *addr_block_of(const uint8_t *addr, size_t len)
{
    const struct addr_block *best = NULL;

    for (size_t i = 0; i < NBLOCKS; i++) {
        const struct addr_block *b = &blocks[i];

        if (b->len == len && (best == NULL || b->prefix > best->prefix) &&
            prefix_eq(addr, b->net, b->prefix))
            best = b;
    }
    return best;
}

const struct addr_block *addr_blocks(size_t *n)
{
    *n = NBLOCKS;
    return blocks;
}

enum addr_class addr_classify(const uint8_t *addr, size_t len)
{
    const struct addr_block *b;
    uint8_t v4[4];
    enum addr_class c4;

    if (len != 4 && len != 16)
        return ADDR_RESERVED;
    b = addr_block_of(addr, len);
    if (b == NULL)
        return ADDR_PUBLIC;
    if (!b->embeds_v4 || hostname_v4_embedded(addr, v4) == HOSTNAME_V4_NONE)
        return b->cls;
    c4 = addr_classify(v4, 4);
    if (c4 != ADDR_PUBLIC)
        return c4;
    return b->reach == ADDR_REACH_TRUE || b->reach == ADDR_REACH_IPV4 ? ADDR_PUBLIC : b->cls;
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
    static const uint8_t v6_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    uint8_t tmp[16];

    if (len == 16 && c->len == 4 && memcmp(addr, v6_mapped, 12) == 0) {
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
    return prefix_eq(addr, c->addr, c->prefix);
}
