/*
 * upstream_rules.c - the parts of the upstream module that decide before any I/O: parsing and
 * checking the upstream options (--dns-server, --resolve, --allow-private, --upstream-proxy),
 * vaultgate's own endpoints, and the destination rules applied to every address before it is
 * dialled (SPEC §4).
 *
 * Guarantees: parsing is strict (ports 1-65535 without leading zeros, IP literals only where an
 * address is expected, no userinfo or path in the proxy URL). An address passes the rules only
 * if it is not one of vaultgate's listener endpoints and it is exempt (pin, proxy), covered by
 * --allow-private, or public (addr_classify) and not an address of the machine: a listener's,
 * or any interface's at the moment of the check (localaddr.h), whatever port is dialled.
 */
#include "proxy/upstream.h"
#include "proxy/reason.h"
#include "audit/log.h"
#include "common/hostport.h"
#include "proxy/localaddr.h"
#include "proxy/upstream_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Own endpoints: written before workers start, read-only afterwards. */
struct own_endpoint {
    uint8_t addr[16];
    size_t len;
    int port;
};
static struct own_endpoint own_eps[UPSTREAM_OWN_MAX];
static size_t own_neps;
/* Wildcard listeners (0.0.0.0 / [::]) by address length and port: they answer on every address
 * of the machine, the ones added after start included, and on all of 127/8, which
 * getifaddrs() lists only as 127.0.0.1. */
static struct own_endpoint own_wild[UPSTREAM_OWN_MAX];
static size_t own_nwild;

/* ---- parsing ---------------------------------------------------------------------------- */

/* A sockaddr_storage of hostport_sockaddr() into the union the dialler uses. */
static int to_sa(const struct hostport *hp, int port, union upstream_sa *out)
{
    struct sockaddr_storage ss;
    socklen_t len;

    if (hostport_sockaddr(hp, port, &ss, &len) < 0)
        return -1;
    memset(out, 0, sizeof(*out));
    memcpy(out, &ss, len);
    return 0;
}

/* An IP literal (v4, v6 or [v6]) of len bytes into sa with port. */
int upstream_parse_ip(const char *s, size_t len, int port, union upstream_sa *out)
{
    struct hostport hp;

    if (hostport_parse(s, len, HOSTPORT_IP_ONLY | HOSTPORT_BARE_V6, &hp) < 0 || hp.has_port)
        return -1;
    return to_sa(&hp, port, out);
}

/* "IP", "IP:PORT", "[v6]", "[v6]:PORT" or a bare v6 address; port defaults to defport. */
int upstream_parse_ip_port(const char *s, int defport, union upstream_sa *out)
{
    struct hostport hp;

    if (hostport_parse(s, strlen(s), HOSTPORT_IP_ONLY | HOSTPORT_BARE_V6, &hp) < 0)
        return -1;
    return to_sa(&hp, hp.has_port ? hp.port : defport, out);
}

/* "HOST[:PORT]" where HOST is a name, a v4 literal or [v6]; normalised into host. */
static int parse_host_port(const char *s, size_t len, int defport, char *host, int *port)
{
    struct hostport hp;
    int p;

    if (hostport_parse(s, len, 0, &hp) < 0)
        return -1;
    p = hp.has_port ? hp.port : defport;
    if (p <= 0)
        return -1;
    memcpy(host, hp.host, strlen(hp.host) + 1);
    *port = p;
    return 0;
}

/* --resolve HOST:PORT:ADDR */
int upstream_parse_pin(const char *s, struct upstream_pin *out)
{
    struct upstream_pin p;
    const char *c1, *c2;

    memset(&p, 0, sizeof(p));
    if (s[0] == '[') {
        c1 = strchr(s, ']');
        c1 = c1 != NULL ? strchr(c1, ':') : NULL;
    } else {
        c1 = strchr(s, ':');
    }
    if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
        return -1;
    if (parse_host_port(s, (size_t)(c2 - s), -1, p.host, &p.port) != 0)
        return -1;
    if (upstream_parse_ip(c2 + 1, strlen(c2 + 1), p.port, &p.addr) != 0)
        return -1;
    *out = p;
    return 0;
}

/* --upstream-proxy http://HOST[:PORT][/] (port 80 when absent). */
int upstream_parse_proxy_url(const char *s, char *host, int *port)
{
    size_t len;

    if (strncasecmp(s, "http://", 7) != 0)
        return -1;
    s += 7;
    len = strlen(s);
    if (len > 0 && s[len - 1] == '/')
        len--;
    if (len == 0 || memchr(s, '/', len) != NULL || memchr(s, '@', len) != NULL)
        return -1;
    return parse_host_port(s, len, 80, host, port);
}

int upstream_config_check(const struct upstream_config *cfg, char *err, size_t errlen)
{
    union upstream_sa sa;
    struct upstream_pin pin;
    struct addr_cidr cidr;
    char host[HOSTNAME_BUFSZ];
    int port;

    for (size_t i = 0; i < cfg->ndns; i++) {
        if (upstream_parse_ip_port(cfg->dns_servers[i], 53, &sa) != 0) {
            snprintf(err, errlen, "--dns-server %s: expected IP, IP:PORT or [IPv6]:PORT",
                     cfg->dns_servers[i]);
            return -1;
        }
    }
    for (size_t i = 0; i < cfg->npins; i++) {
        if (upstream_parse_pin(cfg->pins[i], &pin) != 0) {
            snprintf(err, errlen, "--resolve %s: expected HOST:PORT:ADDR", cfg->pins[i]);
            return -1;
        }
    }
    for (size_t i = 0; i < cfg->nallow; i++) {
        if (addr_parse_cidr(cfg->allow_private[i], &cidr) != 0) {
            snprintf(err, errlen, "--allow-private %s: expected IP/PREFIX with no host bits set",
                     cfg->allow_private[i]);
            return -1;
        }
    }
    if (cfg->upstream_proxy != NULL &&
        upstream_parse_proxy_url(cfg->upstream_proxy, host, &port) != 0) {
        snprintf(err, errlen, "--upstream-proxy %s: expected http://HOST:PORT",
                 cfg->upstream_proxy);
        return -1;
    }
    if (cfg->connect_timeout < 0 || cfg->tls_timeout < 0 || cfg->pool_idle_timeout < 0) {
        snprintf(err, errlen, "upstream timeouts must not be negative");
        return -1;
    }
    return 0;
}

/* ---- destination rules ------------------------------------------------------------------ */

/* Address bytes of sa (IPv4-mapped IPv6 reduced to IPv4), and its port. */
static const uint8_t *sa_bytes(const union upstream_sa *a, size_t *len, int *port)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

    if (a->sa.sa_family == AF_INET) {
        *len = 4;
        *port = ntohs(a->sin.sin_port);
        return (const uint8_t *)&a->sin.sin_addr;
    }
    *port = ntohs(a->sin6.sin6_port);
    if (memcmp(&a->sin6.sin6_addr, mapped, 12) == 0) {
        *len = 4;
        return (const uint8_t *)&a->sin6.sin6_addr + 12;
    }
    *len = 16;
    return (const uint8_t *)&a->sin6.sin6_addr;
}

static int own_add(const union upstream_sa *a)
{
    size_t len;
    int port;
    const uint8_t *b = sa_bytes(a, &len, &port);

    for (size_t i = 0; i < own_neps; i++) {
        if (own_eps[i].len == len && own_eps[i].port == port &&
            memcmp(own_eps[i].addr, b, len) == 0)
            return 0;
    }
    if (own_neps >= UPSTREAM_OWN_MAX)
        return -1;
    memcpy(own_eps[own_neps].addr, b, len);
    own_eps[own_neps].len = len;
    own_eps[own_neps].port = port;
    own_neps++;
    return 0;
}

int upstream_add_own_address(const struct sockaddr *sa)
{
    union upstream_sa a;
    size_t len;
    int port;
    const uint8_t *b;

    memset(&a, 0, sizeof(a));
    if (sa->sa_family == AF_INET)
        memcpy(&a.sin, sa, sizeof(a.sin));
    else if (sa->sa_family == AF_INET6)
        memcpy(&a.sin6, sa, sizeof(a.sin6));
    else
        return -1;
    b = sa_bytes(&a, &len, &port);
    if (addr_classify(b, len) != ADDR_UNSPECIFIED)
        return own_add(&a);
    /* A wildcard listener is reachable on every local address: matched at each check. */
    for (size_t i = 0; i < own_nwild; i++) {
        if (own_wild[i].len == len && own_wild[i].port == port)
            return 0;
    }
    if (own_nwild >= UPSTREAM_OWN_MAX)
        return -1;
    own_wild[own_nwild].len = len;
    own_wild[own_nwild].port = port;
    own_nwild++;
    return 0;
}

/*
 * 1 own endpoint (a listener's address and port, or a wildcard listener's port on an address
 * of the machine), 2 an address of the machine on another port, 0 neither. local: the worker's
 * view of the machine's addresses (NULL: listener addresses and loopback only).
 */
static int own_match(struct localaddr *local, const uint8_t *b, size_t len, int port)
{
    int r = 0;

    for (size_t i = 0; i < own_neps; i++) {
        if (own_eps[i].len != len || memcmp(own_eps[i].addr, b, len) != 0)
            continue;
        if (own_eps[i].port == port)
            return 1;
        r = 2;
    }
    if (r == 0 && addr_classify(b, len) != ADDR_LOOPBACK && !localaddr_has(local, b, len))
        return 0;
    for (size_t i = 0; i < own_nwild; i++) {
        if (own_wild[i].len == len && own_wild[i].port == port)
            return 1;
    }
    return 2;
}

static bool allow_listed(const struct addr_cidr *allow, size_t nallow, const uint8_t *b, size_t len)
{
    for (size_t i = 0; i < nallow; i++) {
        if (addr_in_cidr(b, len, &allow[i]))
            return true;
    }
    return false;
}

static void log_prohibited(const char *host, const union upstream_sa *a, const char *why)
{
    struct log_fields f = LOG_FIELDS_INIT;
    char ip[INET6_ADDRSTRLEN], detail[INET6_ADDRSTRLEN + 48];

    if (!log_enabled(LOG_DEBUG))
        return;
    if (a->sa.sa_family == AF_INET)
        inet_ntop(AF_INET, &a->sin.sin_addr, ip, sizeof(ip));
    else
        inet_ntop(AF_INET6, &a->sin6.sin6_addr, ip, sizeof(ip));
    snprintf(detail, sizeof(detail), "%s %s", ip, why);
    f.host = host;
    f.reason = VG_PS_IP_PROHIBITED;
    f.detail = detail;
    log_event(LOG_DEBUG, "upstream_address_skipped", &f);
}

bool upstream_dest_allowed(const struct addr_cidr *allow, size_t nallow, struct localaddr *local,
                           const char *host, const union upstream_sa *a, bool exempt)
{
    size_t len;
    int port, own;
    const uint8_t *b = sa_bytes(a, &len, &port);
    enum addr_class cls;

    own = own_match(local, b, len, port);
    if (own == 1) {
        log_prohibited(host, a, "is a vaultgate listener");
        return false;
    }
    if (exempt || allow_listed(allow, nallow, b, len))
        return true;
    cls = addr_classify(b, len);
    if (cls != ADDR_PUBLIC) {
        log_prohibited(host, a, addr_class_name(cls));
        return false;
    }
    if (own == 2) {
        log_prohibited(host, a, "is an address of this machine");
        return false;
    }
    return true;
}
