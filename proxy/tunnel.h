/*
 * tunnel.h - byte tunnels: a CONNECT tunnel without interception, and a WebSocket after its
 * 101 (SPEC §4). Both sockets are spliced as they come, with backpressure; the server side of a
 * credentialed WebSocket goes through its message masker (wsmask.c).
 *
 * A tunnel takes over a client connection from its transport (worker_replace) together with the
 * upstream, and ends through tunnel_close() alone, once either side closed and what is queued
 * for the other has been written.
 */
#ifndef VG_TUNNEL_H
#define VG_TUNNEL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <event2/bufferevent.h>

struct worker;
struct worker_link;
struct listen_addr;
struct wsmask;

/* What the tunnel's log line says of it. */
struct tunnel_info {
    uint64_t id;
    const char *client_addr;
    const struct listen_addr *la;
    const char *host;
    bool route_tunnel; /* the upstream went through --upstream-proxy */
    bool inject;       /* a credentialed WebSocket */
    struct timespec t_start;
};

/*
 * Splices client and up (both taken, with wsm when not NULL), starting with whatever either has
 * buffered. The tunnel takes the place of `from` in w's connection list; the caller then frees
 * its own object without touching the sockets. ws_fail: the WebSocket is refused from the
 * start (a 101 naming an extension never offered): the client gets a 1002 close and the tunnel
 * ends. Returns 0, or -1 (out of memory: both sockets and wsm were freed, and `from` must close
 * as it would).
 */
int tunnel_start(struct worker *w, struct worker_link *from, struct bufferevent *client,
                 struct bufferevent *up, struct wsmask *wsm, bool ws_fail,
                 const struct tunnel_info *info);

#endif
