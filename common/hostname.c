/*
 * hostname.c - validation and normalisation of host names and IP literals.
 *
 * Guarantees: a name this accepts contains only [a-z0-9.-:] and is safe to put into a
 * certificate SAN, a log line, an audit row and a policy lookup; anything else is refused. Each
 * host has one spelling: an IPv6 literal that carries an IPv4 address (mapped, compatible,
 * NAT64, local-use NAT64, 6to4) comes out as that IPv4 address, so a block of 11.0.0.2 cannot
 * be walked around by writing [::ffff:11.0.0.2], and certificates, logs and audit rows name the
 * host the same way whichever form the client chose.
 */
#include "common/hostname.h"
#include "common/caps.h"

#include <arpa/inet.h>
#include <string.h>

/* Where each IPv6 form keeps its IPv4 address. Every prefix length is a whole number of bytes. */
struct v4_form {
    enum hostname_v4_form form;
    uint8_t prefix[12];
    unsigned prefix_bytes;
    uint8_t at[4]; /* byte offsets of the IPv4 address's four bytes */
};

static const struct v4_form v4_forms[] = {
    {HOSTNAME_V4_MAPPED, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF}, 12, {12, 13, 14, 15}},
    {HOSTNAME_V4_COMPAT, {0}, 12, {12, 13, 14, 15}},
    {HOSTNAME_V4_NAT64, {0x00, 0x64, 0xFF, 0x9B}, 12, {12, 13, 14, 15}},
    /* RFC 6052 §2.2 for a /48: bits 48-63 and 72-87, around the u octet (bits 64-71) */
    {HOSTNAME_V4_NAT64_LOCAL, {0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01}, 6, {6, 7, 9, 10}},
    {HOSTNAME_V4_6TO4, {0x20, 0x02}, 2, {2, 3, 4, 5}},
};

enum hostname_v4_form hostname_v4_embedded(const uint8_t *a, uint8_t v4[4])
{
    for (size_t i = 0; i < sizeof(v4_forms) / sizeof(v4_forms[0]); i++) {
        const struct v4_form *f = &v4_forms[i];

        if (memcmp(a, f->prefix, f->prefix_bytes) != 0)
            continue;
        /* :: and ::1 are the unspecified and loopback addresses, not 0.0.0.0 and 0.0.0.1 */
        if (f->form == HOSTNAME_V4_COMPAT && a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] <= 1)
            return HOSTNAME_V4_NONE;
        for (size_t j = 0; j < 4; j++)
            v4[j] = a[f->at[j]];
        return f->form;
    }
    return HOSTNAME_V4_NONE;
}

static int is_ldh(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* The dotted-quad text of the IPv4 address b (inet_ntop's, without its sprintf: a literal host
 * is normalised several times per request). out has room for HOSTNAME_BUFSZ bytes. */
static void format_v4(const unsigned char b[4], char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < 4; i++) {
        unsigned int v = b[i];

        if (i > 0)
            out[o++] = '.';
        if (v >= 100)
            out[o++] = (char)('0' + v / 100);
        if (v >= 10)
            out[o++] = (char)('0' + v / 10 % 10);
        out[o++] = (char)('0' + v % 10);
    }
    out[o] = '\0';
}

static int normalize_ip(const char *in, size_t len, char *out, size_t outsz)
{
    char tmp[HOSTNAME_BUFSZ];
    unsigned char bin[16], v4[4];

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
        format_v4(bin, out);
        return HOSTNAME_IPV4;
    }
    if (inet_pton(AF_INET6, tmp, bin) == 1) {
        if (hostname_v4_embedded(bin, v4) != HOSTNAME_V4_NONE) {
            format_v4(v4, out);
            return HOSTNAME_IPV4;
        }
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

/*
 * The last name this thread normalised and what it became. A request's host is normalised
 * three times (the Host field, then the pool's get and release, each given the same bytes), so
 * the second and third are a compare and a copy.
 */
static _Thread_local struct {
    size_t len; /* of in; 0: nothing kept */
    int kind;
    char in[HOSTNAME_BUFSZ];
    char out[HOSTNAME_BUFSZ];
} last;

int hostname_normalize(const char *in, size_t len, char *out, size_t outsz)
{
    int kind;

    if (in == NULL || out == NULL || outsz < HOSTNAME_BUFSZ)
        return -1;
    if (len != 0 && len == last.len && memcmp(in, last.in, len) == 0) {
        memcpy(out, last.out, strlen(last.out) + 1);
        return last.kind;
    }
    kind = normalize_ip(in, len, out, outsz);
    if (kind <= 0 && (kind = normalize_dns(in, len, out, outsz)) < 0)
        return -1;
    if (len < sizeof(last.in)) {
        memcpy(last.in, in, len);
        last.len = len;
        last.kind = kind;
        memcpy(last.out, out, strlen(out) + 1);
    }
    return kind;
}
