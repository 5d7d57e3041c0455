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
    ADDR_PRIVATE,     /* RFC 1918, fc00::/7 */
    ADDR_LOOPBACK,    /* 127/8, ::1 */
    ADDR_LINKLOCAL,   /* 169.254/16, fe80::/10 */
    ADDR_CGNAT,       /* 100.64/10 */
    ADDR_MULTICAST,   /* 224/4, ff00::/8 */
    ADDR_UNSPECIFIED, /* 0/8, :: */
    ADDR_METADATA,    /* 169.254.169.254, fd00:ec2::254 */
    ADDR_RESERVED,    /* 240/4, broadcast, documentation, benchmarking, ... */
};

/*
 * Classifies an IPv4 (len 4) or IPv6 (len 16) address in network byte order. IPv6 forms that
 * embed an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16) are
 * classified by the embedded address when that is not public.
 */
enum addr_class addr_classify(const uint8_t *addr, size_t len);

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
