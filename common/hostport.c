/*
 * hostport.c - the one "host[:port]" parser (see hostport.h).
 *
 * Guarantees: brackets exactly around IPv6 text (which may name an IPv4 host, ::ffff:a.b.c.d);
 * a port is digits only, no sign or space, within 1-65535 (0 and leading zeros only where the
 * flags allow); nothing after the port; the host normalised by the one normaliser, so every
 * caller sees the same host for the same text. No allocation, no logging.
 */
#include "common/hostport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

int hostport_port(const char *s, size_t len, unsigned flags, int *port)
{
    int v = 0;

    if (len == 0 || len > 5 || (s[0] == '0' && len > 1 && !(flags & HOSTPORT_LEADING_ZERO)))
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535 || (v == 0 && !(flags & HOSTPORT_PORT_ZERO)))
        return -1;
    *port = v;
    return 0;
}

/* Where the host ends: after ']' for a bracketed one, at the first ':' otherwise; bare IPv6
 * (two colons or more, when allowed) is all of it. -1 for an unterminated bracket. */
static int host_end(const char *s, size_t len, unsigned flags, size_t *hend, bool *bracketed)
{
    const char *c;

    *bracketed = len > 0 && s[0] == '[';
    if (*bracketed) {
        c = memchr(s, ']', len);
        if (c == NULL)
            return -1;
        *hend = (size_t)(c - s) + 1;
        return 0;
    }
    c = memchr(s, ':', len);
    if (c != NULL && (flags & HOSTPORT_BARE_V6) && memchr(c + 1, ':', len - (size_t)(c - s) - 1))
        c = NULL; /* "::1", "2001:db8::1": an address, not host and port */
    *hend = c != NULL ? (size_t)(c - s) : len;
    return 0;
}

int hostport_parse(const char *s, size_t len, unsigned flags, struct hostport *out)
{
    struct hostport hp;
    size_t hend;
    bool has_colon;

    memset(&hp, 0, sizeof(hp));
    if (s == NULL || len == 0 || host_end(s, len, flags, &hend, &hp.bracketed) < 0 || hend == 0)
        return -1;
    hp.kind = hostname_normalize(s, hend, hp.host, sizeof(hp.host));
    if (hp.kind < 0)
        return -1;
    /* brackets exactly around IPv6 text (bare IPv6 only where allowed, and then whole) */
    has_colon = memchr(s, ':', hend) != NULL;
    if (hp.bracketed != has_colon && !(has_colon && (flags & HOSTPORT_BARE_V6) && hend == len))
        return -1;
    if ((flags & HOSTPORT_IP_ONLY) && hp.kind == HOSTNAME_DNS)
        return -1;
    if (hend < len) {
        if (s[hend] != ':')
            return -1;
        if (hostport_port(s + hend + 1, len - hend - 1, flags, &hp.port) < 0)
            return HOSTPORT_EPORT;
        hp.has_port = true;
    } else if (flags & HOSTPORT_PORT_REQUIRED) {
        return HOSTPORT_EPORT;
    }
    hp.raw = s + (hp.bracketed ? 1 : 0);
    hp.rawlen = hend - (hp.bracketed ? 2 : 0);
    *out = hp;
    return 0;
}

int hostport_sockaddr(const struct hostport *hp, int port, struct sockaddr_storage *ss,
                      socklen_t *sslen)
{
    char text[INET6_ADDRSTRLEN];

    memset(ss, 0, sizeof(*ss));
    if (hp->kind == HOSTNAME_IPV4 && !hp->bracketed) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

        if (inet_pton(AF_INET, hp->host, &s4->sin_addr) != 1)
            return -1;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *sslen = sizeof(*s4);
        return 0;
    }
    if (hp->kind == HOSTNAME_IPV6 || hp->kind == HOSTNAME_IPV4) {
        /* IPv6 text as written: a socket for [::ffff:a.b.c.d] is an IPv6 socket */
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

        if (hp->rawlen >= sizeof(text))
            return -1;
        memcpy(text, hp->raw, hp->rawlen);
        text[hp->rawlen] = '\0';
        if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
            return -1;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *sslen = sizeof(*s6);
        return 0;
    }
    return -1;
}
