/*
 * admin_conn.c - one connection to the admin API: accept, read a request head, write the answer
 * (admin_routes.c decides it), keep-alive or linger and close; timers; room at the cap.
 *
 * Guarantees: one request at a time - while an answer is being written nothing is read - so a
 * connection buffers at most one head (VG_ADMIN_MAX_HEAD_BYTES, fed to the parser and no more)
 * and one answer. A head must arrive within ADMIN_IDLE_S of connect or of the previous answer,
 * an answer must be taken within ADMIN_WRITE_S. Keep-alive as HTTP/1.1 says (HTTP/1.0 always
 * closes); after an answer that closes, the write side is shut and input discarded for a while,
 * so the client reads its answer instead of a reset. At most VG_ADMIN_MAX_CONNS connections, and
 * a new one is never refused for that: the connection that has waited longest for a request head
 * is closed to make room, so idle connections cannot lock out /healthz and /readyz.
 * admin_conn_free() is the only teardown.
 */
#include "proxy/admin_int.h"
#include "audit/log.h"
#include "common/caps.h"
#include "http/http1.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define ADMIN_IDLE_S         30 /* a request head must arrive within this, from connect or answer */
#define ADMIN_WRITE_S        30 /* the client must take an answer within this */
#define ADMIN_LINGER_S       2  /* after an answer that closes, input is discarded this long... */
#define ADMIN_LINGER_MAX     (64 * 1024) /* ...or up to this many bytes */
#define ADMIN_ACCEPT_RETRY_S 1           /* pause after accept() fails (EMFILE) */

/* Accepts unless pausing after an accept error (at the cap, admin_on_accept makes room). */
static void admin_listener_update(struct admin *ad)
{
    if (ad->lev == NULL)
        return;
    if (!ad->accept_paused)
        evconnlistener_enable(ad->lev);
    else
        evconnlistener_disable(ad->lev);
}

void admin_conn_free(struct admin_conn **cp)
{
    struct admin_conn *c = *cp;
    struct admin *ad;

    if (c == NULL)
        return;
    ad = c->ad;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        ad->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    ad->nconns--;
    if (c->bev != NULL)
        bufferevent_free(c->bev); /* closes the socket */
    http1_parser_free(&c->parser);
    if (c->timer != NULL)
        event_free(c->timer);
    free(c);
    *cp = NULL;
    admin_listener_update(ad);
}

static void admin_conn_arm(struct admin_conn *c, int seconds)
{
    struct timeval tv = {seconds, 0};

    evtimer_add(c->timer, &tv);
}

static void admin_conn_set_state(struct admin_conn *c, enum admin_conn_state state)
{
    c->state = state;
    c->since = ++c->ad->seq;
}

/* Ready for the next request head; the deadline for it starts now. */
static void admin_conn_await_head(struct admin_conn *c)
{
    admin_conn_set_state(c, AC_HEAD);
    c->head_bytes = 0;
    c->head_only = false;
    admin_conn_arm(c, ADMIN_IDLE_S);
    bufferevent_enable(c->bev, EV_READ);
}

/* An answer is queued: nothing more is read until it has been written (one at a time). */
static void admin_conn_start_write(struct admin_conn *c)
{
    admin_conn_set_state(c, AC_WRITE);
    bufferevent_disable(c->bev, EV_READ);
    admin_conn_arm(c, ADMIN_WRITE_S);
}

/*
 * After an answer that closes: shut the write side and read and discard what the client still
 * sends, so that closing with unread input does not reset the connection before the client has
 * read the answer. Ends at EOF, after ADMIN_LINGER_S or ADMIN_LINGER_MAX bytes.
 */
static void admin_conn_linger(struct admin_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    admin_conn_set_state(c, AC_LINGER);
    c->lingered = evbuffer_get_length(in);
    evbuffer_drain(in, c->lingered);
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    admin_conn_arm(c, ADMIN_LINGER_S);
    bufferevent_enable(c->bev, EV_READ);
}

/*
 * After the answer to a complete head: unless the connection closes, completes the message (it
 * has no body; that frees its head) and resets the parser, so an idle connection holds no head.
 */
static void admin_conn_finish_request(struct admin_conn *c)
{
    c->msg = NULL;
    if (c->close)
        return;
    if (http1_feed(c->parser, "", 0) < 0)
        c->close = true;
    http1_parser_reset(c->parser);
}

static int admin_conn_on_head(void *arg, struct http1_msg *msg)
{
    struct admin_conn *c = arg;

    c->msg = msg;
    return 1; /* pause: answered before anything after the head is parsed */
}

static const struct http1_callbacks parser_cb = {.on_head = admin_conn_on_head};

/*
 * Feeds buffered input to the parser, at most up to VG_ADMIN_MAX_HEAD_BYTES for one head, and
 * answers when a head is complete, invalid or over the cap. Called from the top of a callback
 * only: it may free the connection.
 */
static void admin_conn_read_head(struct admin_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t n = evbuffer_get_length(in), room = VG_ADMIN_MAX_HEAD_BYTES - c->head_bytes;
    ssize_t used = 0;

    if (n > room)
        n = room;
    if (n > 0) {
        const char *data = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);

        if (data == NULL) {
            admin_conn_free(&c);
            return;
        }
        used = http1_feed(c->parser, data, n);
        if (used < 0) {
            admin_answer_parse_error(c, http1_error(c->parser, NULL));
            goto answered;
        }
        evbuffer_drain(in, (size_t)used);
        c->head_bytes += (size_t)used;
    }
    if (c->msg != NULL) {
        admin_answer(c, c->msg);
        admin_conn_finish_request(c);
        goto answered;
    }
    if (c->head_bytes >= VG_ADMIN_MAX_HEAD_BYTES) {
        admin_answer_too_large(c);
        goto answered;
    }
    return; /* more input needed */
answered:
    if (c->broken)
        admin_conn_free(&c);
    else
        admin_conn_start_write(c);
}

static void admin_conn_on_read(struct bufferevent *bev, void *arg)
{
    struct admin_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    if (c->state == AC_HEAD) {
        admin_conn_read_head(c);
    } else if (c->state == AC_LINGER) {
        c->lingered += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (c->lingered > ADMIN_LINGER_MAX)
            admin_conn_free(&c);
    }
}

/* The output has drained: the answer is written. */
static void admin_conn_on_write(struct bufferevent *bev, void *arg)
{
    struct admin_conn *c = arg;

    if (c->state != AC_WRITE)
        return;
    if (c->close) {
        admin_conn_linger(c);
        return;
    }
    admin_conn_await_head(c);
    if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
        admin_conn_read_head(c); /* a pipelined request */
}

/* EOF, a socket error: nothing more can be answered. */
static void admin_conn_on_event(struct bufferevent *bev, short what, void *arg)
{
    struct admin_conn *c = arg;

    admin_conn_free(&c);
}

/* The head did not arrive in time, the answer was not taken, or lingering ended. */
static void admin_conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct admin_conn *c = arg;

    admin_conn_free(&c);
}

/*
 * At VG_ADMIN_MAX_CONNS: closes the connection that has waited longest for a request head (an
 * idle keep-alive connection, or a head still arriving); when every connection is being
 * answered or lingering, the one longest in that state. false when there is none to close.
 */
static bool admin_make_room(struct admin *ad)
{
    struct admin_conn *head = NULL, *any = NULL;

    for (struct admin_conn *c = ad->conns; c != NULL; c = c->next) {
        if (c->state == AC_HEAD && (head == NULL || c->since < head->since))
            head = c;
        if (any == NULL || c->since < any->since)
            any = c;
    }
    if (any == NULL)
        return false;
    admin_conn_free(head != NULL ? &head : &any);
    return true;
}

void admin_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                     void *arg)
{
    struct admin *ad = arg;
    struct admin_conn *c = NULL;
    struct bufferevent *bev = NULL;

    while (ad->nconns >= VG_ADMIN_MAX_CONNS && admin_make_room(ad))
        ;
    c = calloc(1, sizeof(*c));
    bev = c != NULL ? bufferevent_socket_new(ad->base, fd, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (bev == NULL) {
        evutil_closesocket(fd);
        free(c);
        return;
    }
    c->ad = ad;
    c->bev = bev;
    c->next = ad->conns;
    if (ad->conns != NULL)
        ad->conns->prev = c;
    ad->conns = c;
    ad->nconns++;
    c->parser = http1_parser_new(HTTP1_REQUEST, &parser_cb, c);
    c->timer = evtimer_new(ad->base, admin_conn_on_timer, c);
    if (c->parser == NULL || c->timer == NULL) {
        admin_conn_free(&c);
        return;
    }
    bufferevent_setcb(bev, admin_conn_on_read, admin_conn_on_write, admin_conn_on_event, c);
    /* never more input buffered than one head may have */
    bufferevent_setwatermark(bev, EV_READ, 0, VG_ADMIN_MAX_HEAD_BYTES);
    admin_conn_await_head(c);
    admin_listener_update(ad);
}

/* accept() failed (EMFILE, ENOBUFS, ...): pause accepting for a moment instead of spinning. */
void admin_on_accept_error(struct evconnlistener *l, void *arg)
{
    struct admin *ad = arg;
    int e = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {ADMIN_ACCEPT_RETRY_S, 0};

    log_eventf(LOG_WARN, "admin_accept_error", "accept", "%s", strerror(e));
    ad->accept_paused = true;
    evtimer_add(ad->retry_ev, &tv);
    admin_listener_update(ad);
}

void admin_on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    struct admin *ad = arg;

    ad->accept_paused = false;
    admin_listener_update(ad);
}
