/*
 * hostport.h - the one grammar of "host[:port]" in vaultgate: Host headers, request targets and
 * CONNECT authorities, listener and admin addresses, --resolve pins, --dns-server and
 * --upstream-proxy.
 *
 * host is a DNS name, an IPv4 literal, or an IPv6 literal in brackets (bare only where the
 * caller allows it and no port follows); it is normalised with hostname_normalize(). port is
 * 1-5 decimal digits. What differs between callers are flags, not copies of the parser.
 */
#ifndef VG_HOSTPORT_H
#define VG_HOSTPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "common/hostname.h"

enum hostport_flags {
    HOSTPORT_PORT_REQUIRED = 1 << 0, /* "host" alone is refused */
    HOSTPORT_PORT_ZERO = 1 << 1,     /* port 0 is accepted */
    HOSTPORT_LEADING_ZERO = 1 << 2,  /* "080" is accepted (RFC 3986 port = *DIGIT) */
    HOSTPORT_IP_ONLY = 1 << 3,       /* the host must be an IP literal */
    HOSTPORT_BARE_V6 = 1 << 4,       /* "::1" without brackets (then without a port) */
};

struct hostport {
    char host[HOSTNAME_BUFSZ]; /* normalised: lower case, no brackets, embedded IPv4 as IPv4 */
    int kind;                  /* enum hostname_kind */
    int port;                  /* 0 when the text named none */
    bool has_port;
    bool bracketed;  /* written as [..] */
    const char *raw; /* the host as written (brackets excluded), inside the parsed text */
    size_t rawlen;
};

/* Parses len bytes at s. 0; or, with out untouched, HOSTPORT_EPORT when the port is wrong
 * (missing where required, not digits, out of range, a leading zero or 0 not allowed), -1 for
 * anything else (the form, the host). */
#define HOSTPORT_EPORT (-2)
int hostport_parse(const char *s, size_t len, unsigned flags, struct hostport *out);

/* The port grammar alone: 0 with *port set, or -1. */
int hostport_port(const char *s, size_t len, unsigned flags, int *port);

/* An IP host and port as a socket address: IPv4 for a dotted quad, IPv6 for bracketed (or bare)
 * IPv6 text as written, embedded IPv4 forms included. 0 or -1 (not an IP literal). */
int hostport_sockaddr(const struct hostport *hp, int port, struct sockaddr_storage *ss,
                      socklen_t *sslen);

#endif
