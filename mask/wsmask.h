/*
 * wsmask.h - reflection masking of a credentialed WebSocket, message by message (SPEC §4
 * "Masking follows messages"): the server-to-client frames are parsed, the payload of one
 * message is masked across all its frames, frame headers go out unchanged, and a message that
 * ends is delivered whole at once.
 *
 * Pure streaming code over evbuffers: no sockets, no logging.
 */
#ifndef VG_WSMASK_H
#define VG_WSMASK_H

#include <stddef.h>

#include <event2/buffer.h>

#include "policy/inject.h"

/* Close code sent to the client when the server breaks the protocol (RFC 6455 §7.4.1). */
#define WSMASK_CLOSE_PROTOCOL 1002

struct wsmask;

/* A masker for the server side of one WebSocket, for the given forms of the secret (copied).
 * NULL when out of memory. */
struct wsmask *wsmask_new(const struct inject_form *forms, size_t nforms);

/* Frees and NULLs *wp (held bytes and tables wiped). NULL-safe. */
void wsmask_free(struct wsmask **wp);

/*
 * Feeds len bytes the server sent and appends to out what may reach the client: complete frame
 * headers, masked payload, whole control frames with masked payload. Bytes that could begin a
 * secret continuing in the next frame of the same message are held back (with the frame headers
 * after them); a message whose final frame is complete is flushed whole.
 * Returns 0, or -1 when the server broke the protocol (a masked frame, a reserved bit or opcode,
 * a fragmented or oversized control frame, a continuation outside a message, a non-minimal or
 * over-long length) or too many frames wait behind held bytes: nothing of the offending frame
 * was appended, and the caller ends the WebSocket with wsmask_fail(). After -1 every further
 * feed fails.
 */
int wsmask_feed(struct wsmask *w, const char *data, size_t len, struct evbuffer *out);

/*
 * Ends the client side after a protocol error (or whenever the caller stops the relay): the
 * frames already begun are completed with '*' for the bytes still held back (they may begin a
 * secret: they are never released), then a close frame with code 1002 is appended.
 * 0, or -1 (out of memory, or a frame cut more than VG_CONN_OUT_CAP bytes before its end: no
 * close frame can follow it) when the caller must close without a close frame.
 */
int wsmask_fail(struct wsmask *w, struct evbuffer *out);

/* 1 while the server is inside a frame or a message (an EOF now would cut it), else 0. */
int wsmask_in_message(const struct wsmask *w);

/* Appends a close frame from the server side (no mask) with code and no reason. 0 or -1. */
int wsmask_close_frame(struct evbuffer *out, unsigned code);

#endif
