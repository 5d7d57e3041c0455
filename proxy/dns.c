/*
 * dns.c - the DNS listeners on the workers' loops (SPEC §12): UDP datagrams and TCP query
 * connections (RFC 1035 §4.2.2 two-byte length framing), each query answered at once by
 * dnsmsg_answer().
 *
 * Guarantees: no query is forwarded, looked up or kept; an answer leaves from the address its
 * query arrived on (IP_PKTINFO / IPV6_PKTINFO on UDP, the accepted socket on TCP), which is
 * also the default A record, so a wildcard listener answers each query with its own local
 * address. Memory is bounded (dns.h); nothing about a query is logged above debug, and the name
 * never. The answer's TXT for the probe name carries the run id of the worker's current policy
 * snapshot, so a reload that changes the run id changes it.
 */
#include "proxy/dns.h"
#include "audit/log.h"
#include "common/caps.h"
#include "policy/policy.h"
#include "proxy/dnsmsg.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#define DNS_UDP_IN_MAX 4096 /* a larger datagram is read truncated, and then malformed */

/* An answer waiting for the UDP socket to take it. */
struct dns_out {
    struct sockaddr_storage peer;
    socklen_t peerlen;
    struct sockaddr_storage local; /* the source address the answer leaves from */
    int ifindex;
    size_t len;
    uint8_t buf[DNSMSG_OUT_MAX];
};

struct dns_udp {
    struct dns_worker *dw;
    int fd;
    struct event *ev;      /* readable: queries */
    struct event *wr_ev;   /* writable, while answers wait */
    struct dns_out *queue; /* ring of VG_DNS_UDP_QUEUE, allocated when first needed */
    size_t qhead, qlen;
};

struct dns_conn {
    struct dns_conn *prev, *next; /* least recently active first */
    struct dns_worker *dw;
    struct bufferevent *bev;
    struct sockaddr_storage local;
};

struct dns_worker {
    struct worker *w;
    struct dns_udp *udp;
    size_t nudp;
    struct dns_conn *head, *tail;
    size_t nconns;
};

int dns_answers_add(struct dns_answers *a, const char *ip, char *err, size_t errlen)
{
    uint8_t buf[16];

    if (inet_pton(AF_INET, ip, buf) == 1) {
        if (a->have_v4) {
            snprintf(err, errlen, "'%s': an IPv4 answer was given already", ip);
            return -1;
        }
        memcpy(a->v4, buf, 4);
        a->have_v4 = true;
        return 0;
    }
    if (inet_pton(AF_INET6, ip, buf) == 1) {
        if (a->have_v6) {
            snprintf(err, errlen, "'%s': an IPv6 answer was given already", ip);
            return -1;
        }
        memcpy(a->v6, buf, 16);
        a->have_v6 = true;
        return 0;
    }
    snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address", ip);
    return -1;
}

/* Answers one query that arrived on local; 0 when it gets none. Counts it. */
static size_t dns_answer(struct dns_worker *dw, const struct sockaddr_storage *local,
                         const uint8_t *q, size_t qlen, uint8_t *out)
{
    const struct dns_answers *da = &dw->w->sh->dns;
    struct dnsmsg_ctx ctx = {0};
    struct dnsmsg_result res;
    size_t len;

    ctx.have_v4 = da->have_v4;
    ctx.have_v6 = da->have_v6;
    memcpy(ctx.v4, da->v4, 4);
    memcpy(ctx.v6, da->v6, 16);
    /* the address it arrived on; unknown (no control message) means no record, never 0.0.0.0 */
    if (!ctx.have_v4 && local->ss_family == AF_INET &&
        ((const struct sockaddr_in *)local)->sin_addr.s_addr != htonl(INADDR_ANY)) {
        memcpy(ctx.v4, &((const struct sockaddr_in *)local)->sin_addr, 4);
        ctx.have_v4 = true;
    }
    ctx.run_id = policy_run_id(worker_policy(dw->w));
    len = dnsmsg_answer(q, qlen, &ctx, out, DNSMSG_OUT_MAX, &res);
    if (len > 0)
        metrics_dns_query(dw->w->id, res.type, res.rcode);
    if (log_enabled(LOG_DEBUG))
        log_eventf(LOG_DEBUG, "dns_query", len > 0 ? dnsmsg_rcode_name(res.rcode) : "dropped",
                   "type=%s", dnsmsg_type_name(res.type));
    return len;
}

/* ---- UDP -------------------------------------------------------------------------------- */

/* The query's destination address from its control messages into o->local / o->ifindex. */
static void udp_local(struct msghdr *mh, int family, struct dns_out *o)
{
    memset(&o->local, 0, sizeof(o->local));
    o->local.ss_family = (sa_family_t)family;
    o->ifindex = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo pi;

            memcpy(&pi, CMSG_DATA(c), sizeof(pi));
            ((struct sockaddr_in *)&o->local)->sin_addr = pi.ipi_addr;
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            struct in6_pktinfo pi;

            memcpy(&pi, CMSG_DATA(c), sizeof(pi));
            ((struct sockaddr_in6 *)&o->local)->sin6_addr = pi.ipi6_addr;
            o->ifindex = (int)pi.ipi6_ifindex;
        }
    }
}

/* Sends o from o->local. 0, or -1 with errno (EAGAIN: try again when writable). */
static int udp_send(int fd, const struct dns_out *o)
{
    union {
        char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {(void *)o->buf, o->len};
    struct msghdr mh = {0};
    struct cmsghdr *c;

    memset(&cm, 0, sizeof(cm));
    mh.msg_name = (void *)&o->peer;
    mh.msg_namelen = o->peerlen;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.buf;
    c = (struct cmsghdr *)cm.buf;
    if (o->local.ss_family == AF_INET) {
        struct in_pktinfo pi = {0};

        pi.ipi_spec_dst = ((const struct sockaddr_in *)&o->local)->sin_addr;
        mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(pi));
        memcpy(CMSG_DATA(c), &pi, sizeof(pi));
    } else {
        struct in6_pktinfo pi = {0};

        pi.ipi6_addr = ((const struct sockaddr_in6 *)&o->local)->sin6_addr;
        pi.ipi6_ifindex = (unsigned)o->ifindex;
        mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(pi));
        memcpy(CMSG_DATA(c), &pi, sizeof(pi));
    }
    for (;;) {
        if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* Keeps an answer the socket would not take; past VG_DNS_UDP_QUEUE it is dropped (the client
 * asks again). */
static void udp_enqueue(struct dns_udp *u, const struct dns_out *o)
{
    if (u->queue == NULL) {
        u->queue = malloc(sizeof(*u->queue) * VG_DNS_UDP_QUEUE);
        if (u->queue == NULL)
            return;
    }
    if (u->qlen == VG_DNS_UDP_QUEUE)
        return;
    u->queue[(u->qhead + u->qlen) % VG_DNS_UDP_QUEUE] = *o;
    u->qlen++;
}

/* Sends what waits; 0 when the queue is empty afterwards. */
static int udp_flush(struct dns_udp *u)
{
    while (u->qlen > 0) {
        if (udp_send(u->fd, &u->queue[u->qhead]) < 0 && (errno == EAGAIN || errno == ENOBUFS))
            return -1;
        u->qhead = (u->qhead + 1) % VG_DNS_UDP_QUEUE;
        u->qlen--;
    }
    return 0;
}

/* Reads at most VG_DNS_UDP_BURST datagrams per wake-up, so TCP and HTTP get their turn. */
static void udp_cb(evutil_socket_t fd, short what, void *arg)
{
    struct dns_udp *u = arg;
    uint8_t in[DNS_UDP_IN_MAX];
    union {
        char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
        struct cmsghdr align;
    } cm;
    struct dns_out o;

    (void)what;
    for (int i = 0; i < VG_DNS_UDP_BURST; i++) {
        struct iovec iov = {in, sizeof(in)};
        struct msghdr mh = {0};
        ssize_t n;

        mh.msg_name = &o.peer;
        mh.msg_namelen = sizeof(o.peer);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof(cm.buf);
        n = recvmsg(fd, &mh, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break; /* EAGAIN, or an ICMP error of an earlier answer: nothing to do */
        }
        o.peerlen = mh.msg_namelen;
        udp_local(&mh, o.peer.ss_family, &o);
        o.len = dns_answer(u->dw, &o.local, in, (size_t)n, o.buf);
        if (o.len == 0)
            continue;
        if (u->qlen > 0 || udp_send(fd, &o) < 0) {
            if (u->qlen == 0 && errno != EAGAIN && errno != ENOBUFS)
                continue; /* the peer is gone (unreachable): drop */
            udp_enqueue(u, &o);
        }
    }
    if (u->qlen > 0)
        event_add(u->wr_ev, NULL);
}

static void udp_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct dns_udp *u = arg;

    (void)fd;
    (void)what;
    if (udp_flush(u) < 0)
        event_add(u->wr_ev, NULL);
}

/* ---- TCP -------------------------------------------------------------------------------- */

static void conn_unlink(struct dns_worker *dw, struct dns_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        dw->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        dw->tail = c->prev;
    c->prev = c->next = NULL;
}

static void conn_append(struct dns_worker *dw, struct dns_conn *c)
{
    c->prev = dw->tail;
    c->next = NULL;
    if (dw->tail != NULL)
        dw->tail->next = c;
    else
        dw->head = c;
    dw->tail = c;
}

static void conn_close(struct dns_conn *c)
{
    struct dns_worker *dw = c->dw;

    conn_unlink(dw, c);
    dw->nconns--;
    bufferevent_free(c->bev);
    free(c);
}

/* Answers every complete query in the input, until the output holds VG_DNS_TCP_OUT_MAX. */
static void conn_read_cb(struct bufferevent *bev, void *arg)
{
    struct dns_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev), *out = bufferevent_get_output(bev);
    uint8_t answer[2 + DNSMSG_OUT_MAX];

    conn_unlink(c->dw, c); /* active: last to be closed for room */
    conn_append(c->dw, c);
    while (evbuffer_get_length(out) < VG_DNS_TCP_OUT_MAX) {
        uint8_t hdr[2];
        size_t n, len;
        const uint8_t *q;

        if (evbuffer_copyout(in, hdr, 2) < 2)
            break;
        n = (size_t)hdr[0] << 8 | hdr[1];
        if (evbuffer_get_length(in) < 2 + n)
            break;
        q = evbuffer_pullup(in, (ev_ssize_t)(2 + n));
        len = q != NULL ? dns_answer(c->dw, &c->local, q + 2, n, answer + 2) : 0;
        evbuffer_drain(in, 2 + n);
        if (len == 0) { /* not a query (or no memory): the connection ends */
            conn_close(c);
            return;
        }
        answer[0] = (uint8_t)(len >> 8);
        answer[1] = (uint8_t)len;
        evbuffer_add(out, answer, 2 + len);
    }
    if (evbuffer_get_length(out) >= VG_DNS_TCP_OUT_MAX)
        bufferevent_disable(bev, EV_READ); /* the client reads its answers first */
}

/* The output drained: read (and answer) again. */
static void conn_write_cb(struct bufferevent *bev, void *arg)
{
    if ((bufferevent_get_enabled(bev) & EV_READ) == 0) {
        bufferevent_enable(bev, EV_READ);
        conn_read_cb(bev, arg);
    }
}

/* End of stream, an error, or VG_DNS_TCP_IDLE_SECONDS without a byte either way. */
static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    conn_close(arg);
}

/* The worker's DNS state, or NULL. */
static struct dns_worker *dns_state(struct worker *w)
{
    void **st = worker_module_state(w, &dns_worker_module);

    return st != NULL ? *st : NULL;
}

/* A TCP query connection accepted on la: fd is owned from here (closed on any failure). */
static void dns_accept(struct worker *w, const struct listen_addr *la, int fd,
                       const struct sockaddr *sa, int salen)
{
    struct dns_worker *dw = dns_state(w);
    struct timeval idle = {VG_DNS_TCP_IDLE_SECONDS, 0};
    socklen_t sl;
    struct dns_conn *c;

    (void)la;
    (void)sa;
    (void)salen;
    if (dw == NULL || (c = calloc(1, sizeof(*c))) == NULL) {
        close(fd);
        return;
    }
    sl = sizeof(c->local);
    if (getsockname(fd, (struct sockaddr *)&c->local, &sl) < 0 ||
        evutil_make_socket_nonblocking(fd) < 0 ||
        (c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
        close(fd);
        free(c);
        return;
    }
    c->dw = dw;
    if (dw->nconns >= VG_DNS_TCP_CONNS)
        conn_close(dw->head); /* the least recently active makes room */
    conn_append(dw, c);
    dw->nconns++;
    bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
    bufferevent_setwatermark(c->bev, EV_READ, 0, 2 + 65535); /* one DNS message at most */
    bufferevent_set_timeouts(c->bev, &idle, &idle);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* ---- the worker's DNS state ------------------------------------------------------------- */

/* Takes the UDP sockets of w's DNS listeners (their udp_fd becomes -1). Worker set-up, main
 * thread. 0 or -1 + err. */
static int dns_worker_start(struct worker *w, char *err, size_t errlen)
{
    struct worker_shared *sh = w->sh;
    void **st = worker_module_state(w, &dns_worker_module);
    struct dns_worker *dw;
    size_t k = 0, ndns = 0;

    for (size_t i = 0; i < sh->naddrs; i++)
        ndns += sh->addrs[i].kind == LISTEN_DNS;
    if (ndns == 0 || st == NULL)
        return 0;
    dw = calloc(1, sizeof(*dw));
    if (dw == NULL || (dw->udp = calloc(ndns, sizeof(*dw->udp))) == NULL) {
        free(dw);
        snprintf(err, errlen, "worker %d: out of memory", w->id);
        return -1;
    }
    dw->w = w;
    *st = dw;
    for (size_t i = 0; i < sh->naddrs; i++) {
        struct listen_addr *la = &sh->addrs[i];
        struct dns_udp *u;

        if (la->kind != LISTEN_DNS || listen_udp_worker(k++, sh->nworkers) != w->id)
            continue;
        u = &dw->udp[dw->nudp++];
        u->dw = dw;
        u->fd = la->udp_fd;
        la->udp_fd = -1;
        u->ev = event_new(w->base, u->fd, EV_READ | EV_PERSIST, udp_cb, u);
        u->wr_ev = event_new(w->base, u->fd, EV_WRITE, udp_write_cb, u);
        if (u->ev == NULL || u->wr_ev == NULL || event_add(u->ev, NULL) < 0) {
            snprintf(err, errlen, "worker %d: listener %s", w->id, la->label);
            return -1;
        }
    }
    return 0;
}

/* Closes w's UDP sockets and TCP query connections and frees its DNS state. Idempotent. */
static void dns_worker_stop(struct worker *w)
{
    struct dns_worker *dw = dns_state(w);

    if (dw == NULL)
        return;
    while (dw->head != NULL)
        conn_close(dw->head);
    for (size_t i = 0; i < dw->nudp; i++) {
        if (dw->udp[i].ev != NULL)
            event_free(dw->udp[i].ev);
        if (dw->udp[i].wr_ev != NULL)
            event_free(dw->udp[i].wr_ev);
        close(dw->udp[i].fd);
        free(dw->udp[i].queue);
    }
    free(dw->udp);
    free(dw);
    *worker_module_state(w, &dns_worker_module) = NULL;
}

const struct worker_module dns_worker_module = {
    .name = "dns",
    .accepts = 1u << LISTEN_DNS,
    .accept = dns_accept, /* bounded by this file's own per-worker cap */
    .init = dns_worker_start,
    .stop = dns_worker_stop,
    .free = dns_worker_stop,
};
