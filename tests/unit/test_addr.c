/*
 * test_addr.c - the destination address rules (proxy/addr.c): every row of the table of blocks
 * with addresses inside it and just outside, the shape of the table itself (host bits, the
 * reach column against the class column, the embedding rows against common/hostname.c), the
 * IPv6 forms that embed IPv4, and CIDR parsing and matching.
 */
#include "proxy/addr.h"
#include "common/hostname.h"

#include <arpa/inet.h>
#include <check.h>
#include <string.h>

struct class_case {
    const char *ip;
    enum addr_class cls;
};

/*
 * Every row of the table with an address inside it (its first and last address where no more
 * specific row takes them) and the neighbours just outside it, written from the registries,
 * not from addr.c. test_every_row_tested checks that each row is the most specific block of
 * some case here.
 */
static const struct class_case class_cases[] = {
    /* 0.0.0.0/8 "This network", 0.0.0.0/32 "This host on this network" */
    {"0.0.0.0", ADDR_UNSPECIFIED},
    {"0.0.0.1", ADDR_UNSPECIFIED},
    {"0.255.255.255", ADDR_UNSPECIFIED},
    {"1.0.0.0", ADDR_PUBLIC},
    /* 10/8 */
    {"9.255.255.255", ADDR_PUBLIC},
    {"10.0.0.0", ADDR_PRIVATE},
    {"10.255.255.255", ADDR_PRIVATE},
    {"11.0.0.0", ADDR_PUBLIC},
    /* 100.64/10 */
    {"100.63.255.255", ADDR_PUBLIC},
    {"100.64.0.0", ADDR_CGNAT},
    {"100.127.255.255", ADDR_CGNAT},
    {"100.128.0.0", ADDR_PUBLIC},
    /* 127/8 */
    {"126.255.255.255", ADDR_PUBLIC},
    {"127.0.0.0", ADDR_LOOPBACK},
    {"127.0.0.1", ADDR_LOOPBACK},
    {"127.255.255.255", ADDR_LOOPBACK},
    {"128.0.0.0", ADDR_PUBLIC},
    /* 169.254/16 and the metadata host */
    {"169.253.255.255", ADDR_PUBLIC},
    {"169.254.0.0", ADDR_LINKLOCAL},
    {"169.254.169.253", ADDR_LINKLOCAL},
    {"169.254.169.254", ADDR_METADATA},
    {"169.254.169.255", ADDR_LINKLOCAL},
    {"169.254.255.255", ADDR_LINKLOCAL},
    {"169.255.0.0", ADDR_PUBLIC},
    /* 172.16/12 */
    {"172.15.255.255", ADDR_PUBLIC},
    {"172.16.0.0", ADDR_PRIVATE},
    {"172.31.255.255", ADDR_PRIVATE},
    {"172.32.0.0", ADDR_PUBLIC},
    /* 192.0.0.0/24 and the rows inside it: /29, .8, .9 and .10 (reachable), .170, .171 */
    {"191.255.255.255", ADDR_PUBLIC},
    {"192.0.0.0", ADDR_RESERVED},
    {"192.0.0.7", ADDR_RESERVED},
    {"192.0.0.8", ADDR_RESERVED},
    {"192.0.0.9", ADDR_PUBLIC},
    {"192.0.0.10", ADDR_PUBLIC},
    {"192.0.0.11", ADDR_RESERVED},
    {"192.0.0.169", ADDR_RESERVED},
    {"192.0.0.170", ADDR_RESERVED},
    {"192.0.0.171", ADDR_RESERVED},
    {"192.0.0.172", ADDR_RESERVED},
    {"192.0.0.255", ADDR_RESERVED},
    {"192.0.1.0", ADDR_PUBLIC},
    /* 192.0.2/24 TEST-NET-1 */
    {"192.0.1.255", ADDR_PUBLIC},
    {"192.0.2.0", ADDR_RESERVED},
    {"192.0.2.255", ADDR_RESERVED},
    {"192.0.3.0", ADDR_PUBLIC},
    /* 192.31.196/24 AS112-v4, 192.52.193/24 AMT: listed, and reachable */
    {"192.31.195.255", ADDR_PUBLIC},
    {"192.31.196.0", ADDR_PUBLIC},
    {"192.31.196.255", ADDR_PUBLIC},
    {"192.31.197.0", ADDR_PUBLIC},
    {"192.52.192.255", ADDR_PUBLIC},
    {"192.52.193.0", ADDR_PUBLIC},
    {"192.52.193.255", ADDR_PUBLIC},
    {"192.52.194.0", ADDR_PUBLIC},
    /* 192.88.99/24 deprecated 6to4 relay anycast (blank: refused), 192.88.99.2 6a44 relay */
    {"192.88.98.255", ADDR_PUBLIC},
    {"192.88.99.0", ADDR_RESERVED},
    {"192.88.99.1", ADDR_RESERVED},
    {"192.88.99.2", ADDR_RESERVED},
    {"192.88.99.255", ADDR_RESERVED},
    {"192.88.100.0", ADDR_PUBLIC},
    /* 192.168/16 */
    {"192.167.255.255", ADDR_PUBLIC},
    {"192.168.0.0", ADDR_PRIVATE},
    {"192.168.255.255", ADDR_PRIVATE},
    {"192.169.0.0", ADDR_PUBLIC},
    /* 192.175.48/24 AS112 direct delegation: reachable */
    {"192.175.47.255", ADDR_PUBLIC},
    {"192.175.48.0", ADDR_PUBLIC},
    {"192.175.48.255", ADDR_PUBLIC},
    {"192.175.49.0", ADDR_PUBLIC},
    /* 198.18/15 */
    {"198.17.255.255", ADDR_PUBLIC},
    {"198.18.0.0", ADDR_RESERVED},
    {"198.19.255.255", ADDR_RESERVED},
    {"198.20.0.0", ADDR_PUBLIC},
    /* 198.51.100/24 */
    {"198.51.99.255", ADDR_PUBLIC},
    {"198.51.100.0", ADDR_RESERVED},
    {"198.51.100.255", ADDR_RESERVED},
    {"198.51.101.0", ADDR_PUBLIC},
    /* 203.0.113/24 */
    {"203.0.112.255", ADDR_PUBLIC},
    {"203.0.113.0", ADDR_RESERVED},
    {"203.0.113.255", ADDR_RESERVED},
    {"203.0.114.0", ADDR_PUBLIC},
    /* 224/4, 240/4, broadcast */
    {"223.255.255.255", ADDR_PUBLIC},
    {"224.0.0.0", ADDR_MULTICAST},
    {"239.255.255.255", ADDR_MULTICAST},
    {"240.0.0.0", ADDR_RESERVED},
    {"254.255.255.255", ADDR_RESERVED},
    {"255.255.255.254", ADDR_RESERVED},
    {"255.255.255.255", ADDR_RESERVED},
    /* ordinary public addresses */
    {"8.8.8.8", ADDR_PUBLIC},
    {"1.1.1.1", ADDR_PUBLIC},
    {"93.184.216.34", ADDR_PUBLIC},

    /* IPv6: outside 2000::/3 is reserved unless named; 2000::/3 is public unless named */
    {"::1:0:0:0", ADDR_RESERVED},
    {"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2000::", ADDR_PUBLIC},
    {"2001:4860:4860::8888", ADDR_PUBLIC},
    {"2606:4700::1111", ADDR_PUBLIC},
    {"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"4000::", ADDR_RESERVED},
    /* ::/128, ::1/128 */
    {"::", ADDR_UNSPECIFIED},
    {"::1", ADDR_LOOPBACK},
    /* IPv4-compatible ::/96 (not globally reachable): the embedded class when not public */
    {"::2", ADDR_UNSPECIFIED}, /* 0.0.0.2 */
    {"::127.0.0.1", ADDR_LOOPBACK},
    {"::10.1.2.3", ADDR_PRIVATE},
    {"::8.8.8.8", ADDR_RESERVED},
    {"::ffff:ffff", ADDR_RESERVED},
    {"::1:0:0", ADDR_RESERVED}, /* neither compatible nor mapped */
    /* IPv4-mapped ::ffff:0:0/96: dialled as IPv4, so the IPv4 address decides */
    {"::ffff:0.0.0.0", ADDR_UNSPECIFIED},
    {"::ffff:127.0.0.1", ADDR_LOOPBACK},
    {"::ffff:10.0.0.1", ADDR_PRIVATE},
    {"::ffff:169.254.169.254", ADDR_METADATA},
    {"::ffff:192.88.99.1", ADDR_RESERVED},
    {"::ffff:192.0.0.9", ADDR_PUBLIC},
    {"::ffff:8.8.8.8", ADDR_PUBLIC},
    {"::ffff:255.255.255.255", ADDR_RESERVED},
    {"::fffe:ffff:ffff", ADDR_RESERVED},
    {"::1:0:0:0:0", ADDR_RESERVED},
    /* NAT64 64:ff9b::/96 (reachable): the embedded class */
    {"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"64:ff9b::", ADDR_UNSPECIFIED},
    {"64:ff9b::a00:1", ADDR_PRIVATE},
    {"64:ff9b::7f00:1", ADDR_LOOPBACK},
    {"64:ff9b::a9fe:a9fe", ADDR_METADATA},
    {"64:ff9b::c058:6301", ADDR_RESERVED}, /* 192.88.99.1 */
    {"64:ff9b::808:808", ADDR_PUBLIC},
    {"64:ff9b::ffff:ffff", ADDR_RESERVED},
    {"64:ff9b:0:0:0:1::", ADDR_RESERVED}, /* outside the /96, outside 2000::/3 */
    /* local-use NAT64 64:ff9b:1::/48, RFC 6052 /48 layout (not globally reachable) */
    {"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"64:ff9b:1::", ADDR_UNSPECIFIED},
    {"64:ff9b:1:808:0:808::", ADDR_PRIVATE},
    {"64:ff9b:1:7f00:0:100::", ADDR_LOOPBACK},
    {"64:ff9b:1:a9fe:a9:fe00::", ADDR_METADATA},
    {"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"64:ff9b:2::", ADDR_RESERVED},
    /* 100::/64 discard-only, 100:0:0:1::/64 dummy prefix */
    {"ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"100::", ADDR_RESERVED},
    {"100::ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"100:0:0:1::", ADDR_RESERVED},
    {"100:0:0:1:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"100:0:0:2::", ADDR_RESERVED},
    /* 2001::/23 IETF protocol assignments and what lies inside it */
    {"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2001::", ADDR_RESERVED}, /* Teredo 2001::/32, N/A */
    {"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:1::", ADDR_RESERVED},
    {"2001:1::1", ADDR_PUBLIC}, /* PCP anycast */
    {"2001:1::2", ADDR_PUBLIC}, /* TURN anycast */
    {"2001:1::3", ADDR_PUBLIC}, /* DNS-SD SRP anycast */
    {"2001:1::4", ADDR_RESERVED},
    {"2001:2::", ADDR_RESERVED}, /* benchmarking 2001:2::/48 */
    {"2001:2:0:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:2:1::", ADDR_RESERVED},
    {"2001:2:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:3::", ADDR_PUBLIC}, /* AMT 2001:3::/32 */
    {"2001:3:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2001:4::", ADDR_RESERVED},
    {"2001:4:111:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:4:112::", ADDR_PUBLIC}, /* AS112-v6 2001:4:112::/48 */
    {"2001:4:112:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2001:4:113::", ADDR_RESERVED},
    {"2001:f:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:10::", ADDR_RESERVED}, /* ORCHID, terminated: blank */
    {"2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:20::", ADDR_PUBLIC}, /* ORCHIDv2 2001:20::/28 */
    {"2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2001:30::", ADDR_PUBLIC}, /* DETs 2001:30::/28 */
    {"2001:3f:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2001:40::", ADDR_RESERVED},
    {"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:200::", ADDR_PUBLIC},
    /* documentation 2001:db8::/32 and 3fff::/20 */
    {"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2001:db8::", ADDR_RESERVED},
    {"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2001:db9::", ADDR_PUBLIC},
    {"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"3fff::", ADDR_RESERVED},
    {"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"3fff:1000::", ADDR_PUBLIC},
    /* 6to4 2002::/16 (N/A): the embedded class when not public, else refused */
    {"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2002::", ADDR_UNSPECIFIED},
    {"2002:0a00:0001::1", ADDR_PRIVATE},
    {"2002:7f00:1::", ADDR_LOOPBACK},
    {"2002:a9fe:a9fe::1", ADDR_METADATA},
    {"2002:c000:0201::", ADDR_RESERVED},
    {"2002:0808:0808::1", ADDR_RESERVED},
    {"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"2003::", ADDR_PUBLIC},
    /* 2620:4f:8000::/48 AS112 direct delegation: reachable */
    {"2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2620:4f:8000::", ADDR_PUBLIC},
    {"2620:4f:8000:ffff:ffff:ffff:ffff:ffff", ADDR_PUBLIC},
    {"2620:4f:8001::", ADDR_PUBLIC},
    /* 5f00::/16 SRv6 SIDs */
    {"5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"5f00::", ADDR_RESERVED},
    {"5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"5f01::", ADDR_RESERVED},
    /* fc00::/7 and the metadata host */
    {"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"fc00::", ADDR_PRIVATE},
    {"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_PRIVATE},
    {"fd00:ec2::254", ADDR_METADATA},
    {"fd00:ec2::253", ADDR_PRIVATE},
    {"fd00:ec2::255", ADDR_PRIVATE},
    {"fe00::", ADDR_RESERVED},
    /* fe80::/10, fec0::/10 (deprecated site-local) */
    {"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    {"fe80::", ADDR_LINKLOCAL},
    {"fe80::1", ADDR_LINKLOCAL},
    {"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_LINKLOCAL},
    {"fec0::", ADDR_RESERVED},
    {"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_RESERVED},
    /* ff00::/8 */
    {"ff00::", ADDR_MULTICAST},
    {"ff02::1", ADDR_MULTICAST},
    {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ADDR_MULTICAST},
};

static void check_class(const struct class_case *c)
{
    uint8_t a[16];
    enum addr_class got;

    if (inet_pton(AF_INET, c->ip, a) == 1) {
        got = addr_classify(a, 4);
    } else {
        ck_assert_msg(inet_pton(AF_INET6, c->ip, a) == 1, "bad test address %s", c->ip);
        got = addr_classify(a, 16);
    }
    ck_assert_msg(got == c->cls, "%s: got %s, want %s", c->ip, addr_class_name(got),
                  addr_class_name(c->cls));
}

START_TEST(test_classify_table)
{
    check_class(&class_cases[_i]);
}
END_TEST

static void to_bin(const char *ip, uint8_t *a, size_t *len);

/* Each row of the table is the most specific block of at least one case of class_cases. */
START_TEST(test_every_row_tested)
{
    size_t n;
    const struct addr_block *rows = addr_blocks(&n), *row = &rows[_i];
    uint8_t a[16];
    size_t len;

    ck_assert_uint_lt((size_t)_i, n);
    for (size_t i = 0; i < sizeof(class_cases) / sizeof(class_cases[0]); i++) {
        to_bin(class_cases[i].ip, a, &len);
        if (addr_block_of(a, len) == row)
            return;
    }
    ck_abort_msg("row %d (%s, /%u) has no test address", _i, row->name, row->prefix);
}
END_TEST

/* The first or last address of row (last: every host bit set). */
static void row_edge(const struct addr_block *row, int last, uint8_t *a)
{
    memcpy(a, row->net, row->len);
    for (unsigned bit = row->prefix; last && bit < row->len * 8u; bit++)
        a[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
}

START_TEST(test_table_shape)
{
    size_t n;
    const struct addr_block *rows = addr_blocks(&n), *row = &rows[_i];
    uint8_t a[16], v4[4];

    ck_assert(row->len == 4 || row->len == 16);
    ck_assert_uint_le(row->prefix, row->len * 8u);
    ck_assert_ptr_nonnull(row->name);
    row_edge(row, 0, a);
    ck_assert_msg(memcmp(a, row->net, row->len) == 0, "%s: host bits set", row->name);
    for (size_t j = 0; j < n; j++) {
        ck_assert_msg(j == (size_t)_i || rows[j].len != row->len || rows[j].prefix != row->prefix ||
                          memcmp(rows[j].net, row->net, row->len) != 0,
                      "%s: listed twice", row->name);
    }
    /* the class says public exactly when the registry says globally reachable */
    if (!row->embeds_v4)
        ck_assert_msg((row->cls == ADDR_PUBLIC) == (row->reach == ADDR_REACH_TRUE), "%s",
                      row->name);
    ck_assert(row->reach != ADDR_REACH_IPV4 || row->embeds_v4);
    ck_assert(!row->embeds_v4 || row->len == 16);
    /* an embedding row is exactly where common/hostname.c finds an IPv4 address */
    for (int last = 0; last <= 1; last++) {
        row_edge(row, last, a);
        if (addr_block_of(a, row->len) == row && row->len == 16)
            ck_assert_msg((hostname_v4_embedded(a, v4) != HOSTNAME_V4_NONE) == row->embeds_v4,
                          "%s: %s address", row->name, last ? "last" : "first");
    }
}
END_TEST

START_TEST(test_classify_bad_len)
{
    static const uint8_t a[16] = {8, 8, 8, 8};

    ck_assert_int_eq(addr_classify(a, 0), ADDR_RESERVED);
    ck_assert_int_eq(addr_classify(a, 5), ADDR_RESERVED);
    ck_assert_int_eq(addr_classify(a, 15), ADDR_RESERVED);
}
END_TEST

START_TEST(test_class_names)
{
    ck_assert_str_eq(addr_class_name(ADDR_PUBLIC), "public");
    ck_assert_str_eq(addr_class_name(ADDR_METADATA), "metadata");
    ck_assert_str_eq(addr_class_name(ADDR_RESERVED), "reserved");
    ck_assert_str_eq(addr_class_name((enum addr_class)99), "unknown");
}
END_TEST

struct cidr_case {
    const char *s;
    int ok;
    size_t len;
    unsigned prefix;
};

static const struct cidr_case cidr_cases[] = {
    {"10.0.0.0/8", 0, 4, 8},
    {"127.0.0.0/8", 0, 4, 8},
    {"0.0.0.0/0", 0, 4, 0},
    {"192.168.1.7", 0, 4, 32},
    {"192.168.1.7/32", 0, 4, 32},
    {"fd00::/8", 0, 16, 8},
    {"::/0", 0, 16, 0},
    {"::1", 0, 16, 128},
    {"2001:db8::/32", 0, 16, 32},
    {"::ffff:10.0.0.0/104", 0, 16, 104},
    {"10.0.0.1/8", -1, 0, 0}, /* host bits set */
    {"fd00::1/8", -1, 0, 0},
    {"10.0.0.0/33", -1, 0, 0},
    {"::/129", -1, 0, 0},
    {"10.0.0.0/", -1, 0, 0},
    {"10.0.0.0/08", -1, 0, 0},
    {"10.0.0.0/+8", -1, 0, 0},
    {"10.0.0.0/ 8", -1, 0, 0},
    {"10.0.0.0/8/8", -1, 0, 0},
    {"10.0.0.0/8x", -1, 0, 0},
    {"/8", -1, 0, 0},
    {"", -1, 0, 0},
    {"10.0.0", -1, 0, 0},
    {"010.0.0.0/8", -1, 0, 0},
    {"host.example/8", -1, 0, 0},
    {"[::1]/128", -1, 0, 0},
    {"fe80::1%eth0/64", -1, 0, 0},
    {"10.0.0.0/4294967304", -1, 0, 0},
};

START_TEST(test_cidr_parse)
{
    const struct cidr_case *c = &cidr_cases[_i];
    struct addr_cidr out, orig;
    int rc;

    memset(&out, 0xA5, sizeof(out));
    orig = out;
    rc = addr_parse_cidr(c->s, &out);
    ck_assert_msg(rc == c->ok, "%s: rc %d", c->s, rc);
    if (rc == 0) {
        ck_assert_uint_eq(out.len, c->len);
        ck_assert_uint_eq(out.prefix, c->prefix);
    } else {
        ck_assert_msg(memcmp(&out, &orig, sizeof(out)) == 0, "%s: out written on failure", c->s);
    }
}
END_TEST

struct match_case {
    const char *cidr;
    const char *ip;
    int in;
};

static const struct match_case match_cases[] = {
    {"10.0.0.0/8", "10.0.0.0", 1},
    {"10.0.0.0/8", "10.255.255.255", 1},
    {"10.0.0.0/8", "9.255.255.255", 0},
    {"10.0.0.0/8", "11.0.0.0", 0},
    {"10.0.0.0/8", "::ffff:10.1.2.3", 1}, /* mapped matches the IPv4 CIDR */
    {"10.0.0.0/8", "::ffff:11.1.2.3", 0},
    {"10.0.0.0/8", "::10.1.2.3", 0}, /* compatible form is not mapped */
    {"10.0.0.0/8", "fd00::1", 0},
    {"127.0.0.0/8", "127.0.0.1", 1},
    {"127.0.0.0/8", "128.0.0.1", 0},
    {"172.16.0.0/12", "172.31.255.255", 1},
    {"172.16.0.0/12", "172.32.0.0", 0},
    {"192.168.1.7", "192.168.1.7", 1},
    {"192.168.1.7", "192.168.1.6", 0},
    {"0.0.0.0/0", "203.0.113.9", 1},
    {"0.0.0.0/0", "2001:db8::1", 0},
    {"fd00::/8", "fd12:3456::1", 1},
    {"fd00::/8", "fc00::1", 0},
    {"fd00::/8", "10.0.0.1", 0},
    {"fe80::/10", "febf::1", 1},
    {"fe80::/10", "fec0::1", 0},
    {"::/0", "::1", 1},
    {"::/0", "8.8.8.8", 1}, /* IPv4 matched as its mapped form */
    {"::ffff:10.0.0.0/104", "10.9.9.9", 1},
    {"::ffff:10.0.0.0/104", "11.9.9.9", 0},
    {"2001:db8::/33", "2001:db8:7fff::1", 1},
    {"2001:db8::/33", "2001:db8:8000::1", 0},
    {"::1", "::1", 1},
    {"::1", "::2", 0},
};

static void to_bin(const char *ip, uint8_t *a, size_t *len)
{
    if (inet_pton(AF_INET, ip, a) == 1) {
        *len = 4;
        return;
    }
    ck_assert(inet_pton(AF_INET6, ip, a) == 1);
    *len = 16;
}

START_TEST(test_cidr_match)
{
    const struct match_case *c = &match_cases[_i];
    struct addr_cidr cidr;
    uint8_t a[16];
    size_t len;

    ck_assert_int_eq(addr_parse_cidr(c->cidr, &cidr), 0);
    to_bin(c->ip, a, &len);
    ck_assert_msg(addr_in_cidr(a, len, &cidr) == c->in, "%s in %s: want %d", c->ip, c->cidr, c->in);
}
END_TEST

/* Every single-bit prefix length of an IPv4 and an IPv6 CIDR: inside at the edge, out past it. */
START_TEST(test_cidr_every_prefix)
{
    struct addr_cidr c;
    uint8_t a[16];

    for (unsigned p = 1; p <= 128; p++) {
        memset(&c, 0, sizeof(c));
        c.len = 16;
        c.prefix = p;
        memset(c.addr, 0, 16);
        memset(a, 0, 16);
        a[(p - 1) / 8] = (uint8_t)(0x80 >> ((p - 1) % 8)); /* last prefix bit differs */
        ck_assert_int_eq(addr_in_cidr(a, 16, &c), 0);
        memset(a, 0xFF, 16);
        for (unsigned b = 0; b < p; b++)
            a[b / 8] &= (uint8_t) ~(0x80 >> (b % 8)); /* prefix bits zero, the rest one */
        ck_assert_int_eq(addr_in_cidr(a, 16, &c), 1);
    }
}
END_TEST

Suite *suite_addr(void);

Suite *suite_addr(void)
{
    Suite *s = suite_create("addr");
    TCase *tc = tcase_create("classify");
    size_t nrows;

    addr_blocks(&nrows);
    tcase_add_loop_test(tc, test_classify_table, 0,
                        (int)(sizeof(class_cases) / sizeof(class_cases[0])));
    tcase_add_loop_test(tc, test_every_row_tested, 0, (int)nrows);
    tcase_add_loop_test(tc, test_table_shape, 0, (int)nrows);
    tcase_add_test(tc, test_classify_bad_len);
    tcase_add_test(tc, test_class_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("cidr");
    tcase_add_loop_test(tc, test_cidr_parse, 0, (int)(sizeof(cidr_cases) / sizeof(cidr_cases[0])));
    tcase_add_loop_test(tc, test_cidr_match, 0,
                        (int)(sizeof(match_cases) / sizeof(match_cases[0])));
    tcase_add_test(tc, test_cidr_every_prefix);
    suite_add_tcase(s, tc);
    return s;
}
