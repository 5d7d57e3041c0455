/*
 * admin_int.h - what the three files of the admin API share, and nothing outside them uses:
 * admin.c (addresses, the listening socket, the thread, start and stop), admin_conn.c (the
 * HTTP/1.1 connection: accept, read a head, write the answer, linger, timers, room at the cap)
 * and admin_routes.c (what a request gets: the Host rule, methods, the endpoints, every answer
 * with its security headers). Everything here runs on the admin thread, except admin_open,
 * admin_serve and admin_stop (the caller's thread, while the admin thread is not running).
 */
#ifndef VG_ADMIN_INT_H
#define VG_ADMIN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include <event2/util.h>

#include "proxy/admin.h"

struct bufferevent;
struct event;
struct event_base;
struct evconnlistener;
struct http1_msg;
struct http1_parser;
struct sockaddr;

struct admin_conn;

struct admin {
    struct event_base *base;
    struct evconnlistener *lev;
    struct event *retry_ev;
    struct event *stop_ev;
    int stop_pipe[2];
    pthread_t thread;
    bool running;
    bool accept_paused;
    struct admin_conn *conns; /* every open connection, for admin_stop */
    unsigned nconns;
    uint64_t seq; /* orders the connections' state changes, for eviction at the cap */
    struct admin_ops ops;
    char *ca_pem;
    size_t ca_pem_len;
    char *audit_url;
    char *run_id;
    bool is_unix;
    char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    dev_t unix_dev;
    ino_t unix_ino;
    char address[160];
};

enum admin_conn_state {
    AC_HEAD = 0, /* reading a request head */
    AC_WRITE,    /* an answer is being written; input is not read meanwhile */
    AC_LINGER,   /* answered, write side shut: input is read and discarded until EOF */
};

/* One accepted connection; lives on the admin thread, in ad->conns. */
struct admin_conn {
    struct admin *ad;
    struct admin_conn *prev, *next;
    struct bufferevent *bev; /* owns the socket */
    struct http1_parser *parser;
    struct event *timer; /* head deadline, write deadline, or end of lingering */
    enum admin_conn_state state;
    uint64_t since;              /* ad->seq when the current state began */
    const struct http1_msg *msg; /* from admin_conn_on_head until the request is answered */
    size_t head_bytes;           /* fed to the parser towards the current head */
    size_t lingered;             /* discarded while lingering */
    bool head_only;              /* answering HEAD: no body */
    bool close;                  /* close once the answer is written */
    bool broken;                 /* the answer could not be queued: drop the connection */
};

/* ---- admin.c ---- */

/* "host[:port]" where host is localhost (any case) or an IP literal ("[v6]" for IPv6). */
bool admin_host_allowed(const char *v, size_t n);

/* ---- admin_conn.c: the listener's callbacks (admin_open) and the one teardown ---- */

void admin_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                     void *arg);
void admin_on_accept_error(struct evconnlistener *l, void *arg);
void admin_on_accept_retry(evutil_socket_t fd, short what, void *arg);

/* Unlinks, closes the socket, frees; NULLs *cp. NULL-safe. */
void admin_conn_free(struct admin_conn **cp);

/* ---- admin_routes.c: each queues one answer on c, sets c->close, or c->broken on failure ---- */

/* A complete, valid head m (the parser is paused on it). */
void admin_answer(struct admin_conn *c, const struct http1_msg *m);

/* A request the parser refused with status (http1_error): closes. */
void admin_answer_parse_error(struct admin_conn *c, int status);

/* A head over VG_ADMIN_MAX_HEAD_BYTES: 431, closes. */
void admin_answer_too_large(struct admin_conn *c);

#endif
