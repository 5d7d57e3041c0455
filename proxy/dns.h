/*
 * dns.h - the DNS listeners of `vaultgate run --listen-dns` (SPEC §12): every query answered
 * here by proxy/dnsmsg.c, none forwarded.
 *
 * listen.c binds each DNS address (TCP per worker like the other listeners, and one UDP
 * socket); the worker that listen_udp_worker() names serves the UDP socket, every worker
 * accepts TCP query connections. Memory is bounded per worker: VG_DNS_TCP_CONNS connections
 * (past it the least recently active one is closed), VG_DNS_UDP_QUEUE answers waiting for the
 * socket, one DNS message of input and VG_DNS_TCP_OUT_MAX of output per connection; a TCP
 * connection idle for VG_DNS_TCP_IDLE_SECONDS is closed.
 */
#ifndef VG_DNS_H
#define VG_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct worker_module;

/* --dns-answer: the A and AAAA records every valid name gets (a missing IPv4 one means the
 * address the query arrived on; a missing IPv6 one, no AAAA record). */
struct dns_answers {
    bool have_v4, have_v6;
    uint8_t v4[4];
    uint8_t v6[16];
};

/* Adds one --dns-answer IP to a (at most one IPv4 and one IPv6). 0 or -1 + err. */
int dns_answers_add(struct dns_answers *a, const char *ip, char *err, size_t errlen);

/* The DNS listeners of each worker: accepts TCP query connections on LISTEN_DNS listeners,
 * serves the UDP sockets listen_udp_worker() gives the worker, closes all at its stop. */
extern const struct worker_module dns_worker_module;

#endif
