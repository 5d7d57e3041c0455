/*
 * addr.h - the destination address rules (SPEC §4): which addresses vaultgate refuses to dial.
 * Pure functions over 4- or 16-byte addresses; no I/O.
 */
#ifndef VG_ADDR_H
#define VG_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum addr_class {
    ADDR_PUBLIC = 0,
    ADDR_PRIVATE,     /* RFC 1918, fc00::/7, local-use NAT64 */
    ADDR_LOOPBACK,    /* 127/8, ::1 */
    ADDR_LINKLOCAL,   /* 169.254/16, fe80::/10 */
    ADDR_CGNAT,       /* 100.64/10 */
    ADDR_MULTICAST,   /* 224/4, ff00::/8 */
    ADDR_UNSPECIFIED, /* 0/8, :: */
    ADDR_METADATA,    /* 169.254.169.254, fd00:ec2::254 */
    ADDR_RESERVED,    /* every other block that is not globally reachable (240/4, documentation,
                         benchmarking, 192.88.99/24, 2001::/23, outside 2000::/3, ...) */
};

/* The registries' "Globally Reachable" column for a block. */
enum addr_reach {
    ADDR_REACH_FALSE = 0, /* not globally reachable: refused */
    ADDR_REACH_TRUE,      /* globally reachable */
    ADDR_REACH_NA,        /* "N/A", or left blank for a terminated block: refused */
    ADDR_REACH_IPV4,      /* never an IPv6 destination: a socket dials the embedded IPv4 address */
};

/* One row of the table of address blocks (addr.c): registry rows and the few vaultgate adds. */
struct addr_block {
    uint8_t len;    /* 4 or 16 */
    uint8_t prefix; /* in bits */
    uint8_t net[16];
    enum addr_class cls; /* ADDR_PUBLIC for a globally reachable block */
    enum addr_reach reach;
    bool embeds_v4;   /* an IPv6 form that carries an IPv4 address (hostname_v4_embedded) */
    const char *name; /* the registry's name of the block and its RFCs */
};

/*
 * Classifies an IPv4 (len 4) or IPv6 (len 16) address in network byte order by the most
 * specific block of the table that contains it (an address no block names is public). An IPv6
 * form that embeds an IPv4 address (hostname_v4_embedded) takes the class of that IPv4 address
 * when it is not public; when it is public, the form's own row decides (NAT64 64:ff9b::/96 and
 * IPv4-mapped: public; IPv4-compatible, local-use NAT64 and 6to4: not globally reachable).
 */
enum addr_class addr_classify(const uint8_t *addr, size_t len);

/* The most specific block that contains addr (len 4 or 16), or NULL when none does. */
const struct addr_block *addr_block_of(const uint8_t *addr, size_t len);

/* The whole table (for tests), *n rows. */
const struct addr_block *addr_blocks(size_t *n);

const char *addr_class_name(enum addr_class c);

/* A CIDR list (--allow-private). */
struct addr_cidr {
    uint8_t addr[16];
    size_t len; /* 4 or 16 */
    unsigned prefix;
};

/* Parses "IP/PREFIX" or a bare IP (full mask). 0 or -1. */
int addr_parse_cidr(const char *s, struct addr_cidr *out);

/* 1 if addr (len 4 or 16) lies in c; an IPv4-mapped IPv6 address matches IPv4 CIDRs. */
int addr_in_cidr(const uint8_t *addr, size_t len, const struct addr_cidr *c);

#endif
