/*
 * hostname.h - the one place where a host name from the outside world (SNI, Host header,
 * CONNECT target, vault pattern) becomes a normalised name that policy, certificates and logs
 * may use.
 */
#ifndef VG_HOSTNAME_H
#define VG_HOSTNAME_H

#include <stddef.h>

enum hostname_kind {
    HOSTNAME_DNS = 1, /* LDH labels, lower case, no trailing dot */
    HOSTNAME_IPV4,    /* dotted quad in canonical form */
    HOSTNAME_IPV6,    /* canonical inet_ntop form, without brackets */
};

/* Buffer size that fits any normalised host plus its NUL. */
#define HOSTNAME_BUFSZ 256

/*
 * Normalises len bytes at in: lower case, one trailing dot removed, IPv6 brackets removed,
 * IP literals in canonical text form. A DNS name must be 1-253 characters of labels of 1-63
 * letters, digits and hyphens (no leading or trailing hyphen) and its last label must not be
 * all digits. No port is accepted here. Writes a NUL-terminated name to out (outsz >=
 * HOSTNAME_BUFSZ) and returns its kind, or returns -1 and leaves out untouched.
 */
int hostname_normalize(const char *in, size_t len, char *out, size_t outsz);

#endif
