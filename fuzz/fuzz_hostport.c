/*
 * fuzz_hostport.c - the "host[:port]" grammar (common/hostport.c) on arbitrary text.
 *
 * Input: byte 0 picks the flags (its low five bits), the rest is the text. Invariants (abort on
 * violation): a result is normalised (hostname_normalize gives it back unchanged), its port is
 * within the flags' range, and writing it out again ("host", "[v6]", ":port") parses to the same
 * host and port under the same flags; an IP-only result is an IP literal and yields a socket
 * address.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hostport hp, again;
    char norm[HOSTNAME_BUFSZ], text[HOSTNAME_BUFSZ + 16];
    struct sockaddr_storage ss;
    socklen_t sl;
    unsigned flags;
    int n;

    if (size < 1)
        return 0;
    flags = data[0] & 0x1f;
    if (hostport_parse((const char *)data + 1, size - 1, flags, &hp) != 0)
        return 0;
    if (hostname_normalize(hp.host, strlen(hp.host), norm, sizeof(norm)) != hp.kind ||
        strcmp(norm, hp.host) != 0)
        abort();
    if (hp.port < 0 || hp.port > 65535 ||
        (hp.has_port && hp.port == 0 && !(flags & HOSTPORT_PORT_ZERO)))
        abort();
    if ((flags & HOSTPORT_IP_ONLY) &&
        (hp.kind == HOSTNAME_DNS || hostport_sockaddr(&hp, hp.port, &ss, &sl) != 0))
        abort();
    n = snprintf(text, sizeof(text), "%s%s%s", hp.kind == HOSTNAME_IPV6 ? "[" : "", hp.host,
                 hp.kind == HOSTNAME_IPV6 ? "]" : "");
    if (hp.has_port)
        n += snprintf(text + n, sizeof(text) - (size_t)n, ":%d", hp.port);
    if (hostport_parse(text, (size_t)n, flags & ~(unsigned)HOSTPORT_BARE_V6, &again) != 0 ||
        strcmp(again.host, hp.host) != 0 || again.port != hp.port)
        abort();
    return 0;
}
