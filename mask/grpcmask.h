/*
 * grpcmask.h - reflection masking of a credentialed gRPC response, message by message (SPEC
 * §10): the 5-byte prefix of each length-prefixed message passes unchanged, its payload goes
 * through the masker, and a message that ends is delivered whole at once.
 *
 * Pure streaming code over evbuffers: no sockets, no logging.
 */
#ifndef VG_GRPCMASK_H
#define VG_GRPCMASK_H

#include <stddef.h>

#include <event2/buffer.h>

#include "policy/inject.h"

struct grpcmask;

/* A masker for the given forms (copied). NULL when out of memory. */
struct grpcmask *grpcmask_new(const struct inject_form *forms, size_t nforms);
void grpcmask_free(struct grpcmask **gp);

/*
 * Feeds len response body bytes; appends to out what may go on. Returns 0, or -1 when a message
 * is compressed (the masker cannot read it; vaultgate asked for identity) or too long for
 * VG_GRPC_MESSAGE_MAX; nothing of that message was appended.
 */
int grpcmask_feed(struct grpcmask *g, const char *data, size_t len, struct evbuffer *out);

/* The body ended: what is held goes out (a message cut short is the server's business). 0 or -1
 * (out of memory). */
int grpcmask_finish(struct grpcmask *g, struct evbuffer *out);

#endif
