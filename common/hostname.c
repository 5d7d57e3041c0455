/*
 * hostname.c - validation and normalisation of host names and IP literals.
 *
 * Guarantees: a name this accepts contains only [a-z0-9.-:] and is safe to put into a
 * certificate SAN, a log line, an audit row and a policy lookup; anything else is refused.
 */
#include "common/hostname.h"
#include "common/caps.h"

#include <arpa/inet.h>
#include <string.h>

static int is_ldh(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

static int normalize_ip(const char *in, size_t len, char *out, size_t outsz)
{
    char tmp[HOSTNAME_BUFSZ];
    unsigned char bin[16];

    if (len == 0 || len >= sizeof(tmp) || memchr(in, '\0', len) != NULL)
        return -1;
    if (in[0] == '[') {
        if (len < 3 || in[len - 1] != ']')
            return -1;
        in++;
        len -= 2;
    }
    memcpy(tmp, in, len);
    tmp[len] = '\0';
    if (inet_pton(AF_INET, tmp, bin) == 1) {
        if (inet_ntop(AF_INET, bin, out, (socklen_t)outsz) == NULL)
            return -1;
        return HOSTNAME_IPV4;
    }
    if (inet_pton(AF_INET6, tmp, bin) == 1) {
        if (inet_ntop(AF_INET6, bin, out, (socklen_t)outsz) == NULL)
            return -1;
        return HOSTNAME_IPV6;
    }
    return -1;
}

static int normalize_dns(const char *in, size_t len, char *out, size_t outsz)
{
    char tmp[HOSTNAME_BUFSZ];
    size_t label = 0, label_start = 0, i;
    int all_digits = 1;

    if (len > 0 && in[len - 1] == '.')
        len--;
    if (len == 0 || len > VG_HOST_MAX || outsz < len + 1)
        return -1;
    for (i = 0; i < len; i++) {
        unsigned char c = lower((unsigned char)in[i]);

        if (c == '.') {
            if (label == 0 || tmp[i - 1] == '-')
                return -1;
            label = 0;
            all_digits = 1;
            label_start = i + 1;
            tmp[i] = '.';
            continue;
        }
        if (!is_ldh(c))
            return -1;
        if (c == '-' && i == label_start)
            return -1;
        if (c < '0' || c > '9')
            all_digits = 0;
        if (++label > VG_LABEL_MAX)
            return -1;
        tmp[i] = (char)c;
    }
    if (label == 0 || tmp[len - 1] == '-' || all_digits)
        return -1;
    memcpy(out, tmp, len);
    out[len] = '\0';
    return HOSTNAME_DNS;
}

int hostname_normalize(const char *in, size_t len, char *out, size_t outsz)
{
    int kind;

    if (in == NULL || out == NULL || outsz < HOSTNAME_BUFSZ)
        return -1;
    kind = normalize_ip(in, len, out, outsz);
    if (kind > 0)
        return kind;
    return normalize_dns(in, len, out, outsz);
}
