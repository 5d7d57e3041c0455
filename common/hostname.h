/*
 * hostname.h - the one place where a host name from the outside world (SNI, Host header,
 * CONNECT target, vault pattern) becomes a normalised name that policy, certificates and logs
 * may use.
 */
#ifndef VG_HOSTNAME_H
#define VG_HOSTNAME_H

#include <stddef.h>
#include <stdint.h>

enum hostname_kind {
    HOSTNAME_DNS = 1, /* LDH labels, lower case, no trailing dot */
    HOSTNAME_IPV4,    /* dotted quad in canonical form */
    HOSTNAME_IPV6,    /* canonical inet_ntop form, without brackets */
};

/* The IPv6 forms that carry an IPv4 address (SPEC §3). */
enum hostname_v4_form {
    HOSTNAME_V4_NONE = 0,
    HOSTNAME_V4_MAPPED,      /* ::ffff:0:0/96, RFC 4291 */
    HOSTNAME_V4_COMPAT,      /* ::/96 except :: and ::1, RFC 4291 (deprecated) */
    HOSTNAME_V4_NAT64,       /* 64:ff9b::/96, RFC 6052 */
    HOSTNAME_V4_NAT64_LOCAL, /* 64:ff9b:1::/48, RFC 8215, laid out as RFC 6052 says for a /48 */
    HOSTNAME_V4_6TO4,        /* 2002::/16, RFC 3056: bits 16-47 */
};

/* Buffer size that fits any normalised host plus its NUL. */
#define HOSTNAME_BUFSZ 256

/*
 * Normalises len bytes at in: lower case, one trailing dot removed, IPv6 brackets removed,
 * IP literals in canonical text form. An IPv6 literal that embeds an IPv4 address (any form of
 * enum hostname_v4_form) is that IPv4 host: it comes back as HOSTNAME_IPV4 in dotted-quad form,
 * so `[::ffff:11.0.0.2]` and `[64:ff9b::b00:2]` are both `11.0.0.2`. A DNS name must be 1-253
 * characters of labels of 1-63 letters, digits and hyphens (no leading or trailing hyphen) and
 * its last label must not be all digits. No port is accepted here. Writes a NUL-terminated name
 * to out (outsz >= HOSTNAME_BUFSZ) and returns its kind, or returns -1 and leaves out untouched.
 */
int hostname_normalize(const char *in, size_t len, char *out, size_t outsz);

/*
 * The IPv4 address that the IPv6 address a (16 bytes, network order) embeds: writes it to v4
 * and returns its form, or returns HOSTNAME_V4_NONE and leaves v4 untouched. The bits around
 * the IPv4 address (6to4 subnet and interface id, the RFC 6052 u octet and suffix) are ignored.
 */
enum hostname_v4_form hostname_v4_embedded(const uint8_t *a, uint8_t v4[4]);

#endif
