/*
 * mask.h - reflection masking (SPEC §4): an upstream that echoes a request must not hand the
 * injected secret back to the sandbox. Every occurrence of any of the secret's forms (raw;
 * base64 of user:secret for basic; for a form flagged INJECT_FORM_VALUE also its base64 in both
 * alphabets at the three alignments inside a longer base64 text, the characters that depend on
 * the value alone) in the response head and body, in any spelling - each byte raw,
 * percent-encoded (`%hh`, either case; `+` for a space) or JSON-escaped (`\u00hh`, `\/`, `\\`,
 * `\"`), mixed freely - is replaced by '*' bytes of the same length, across buffer boundaries.
 * Binary header fields (`-bin`) are decoded, masked and encoded again. gzip/deflate bodies are
 * decoded first. Pure streaming code: no sockets, no logging.
 */
#ifndef VG_MASK_H
#define VG_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "policy/httphead.h"
#include "policy/inject.h"

struct mask;

/*
 * A masker for the given forms (copied; wiped on free; each at most VG_MASK_FORM_MAX bytes, at
 * most VG_MASK_FORMS_MAX of them: a credential's own and its secret's earlier values'), and the
 * base64 forms of those flagged INJECT_FORM_VALUE (docs/internals/mask.md: those under 4
 * characters left out, each distinct form once).
 * Holds back only bytes from the earliest one that begins a partial spelling of a form (one
 * that can still be completed) - at most 6 bytes per byte of the longest form - so a stream
 * (SSE) whose tail cannot begin a spelling is passed on with no delay.
 */
struct mask *mask_new(const struct inject_form *forms, size_t nforms);
void mask_free(struct mask **mp);
/* The bytes m holds: its block (the stream's state and held-back buffer) and mask_head's matchers
 * once made; for the bound of a cache of maskers. */
size_t mask_mem(const struct mask *m);

/*
 * The part of a masker that depends on the forms alone - each form's matcher tables and the
 * filter shared by all forms - made once (mask_set_new: the same forms and rules as mask_new)
 * and shared by any number of maskers (mask_new_from), each of which holds a reference. A set
 * and its maskers belong to one thread (the reference count is not atomic). mask_set_free drops
 * the caller's reference; the last one frees the set (wiped). mask_new is mask_set_new,
 * mask_new_from and mask_set_free in one.
 */
struct mask_set;
struct mask_set *mask_set_new(const struct inject_form *forms, size_t nforms);
void mask_set_free(struct mask_set **sp);

/* A masker over set's forms: only the stream's state is made (one block, and one per form). */
struct mask *mask_new_from(struct mask_set *set);

/* Masks len bytes and appends what is safe to emit to out. 0 or -1 (out of memory). */
int mask_feed(struct mask *m, const char *data, size_t len, struct evbuffer *out);

/* End of the stream: emits the held-back bytes (they are no secret). 0 or -1. Afterwards the
 * masker is ready for a new stream (e.g. the next response on a keep-alive connection). */
int mask_finish(struct mask *m, struct evbuffer *out);

/* Occurrences masked by mask_feed since mask_new, counted once per form and end offset (a
 * count for metrics; never a secret). */
uint64_t mask_count(const struct mask *m);

/* Masks every field value (and the reason phrase) of a head in place. Returns how many
 * occurrences were masked. Field names are masked as well ('*' is a token character); each
 * string is masked on its own. The value of a field whose name ends in "-bin" (gRPC binary
 * metadata) is base64-decoded (standard alphabet, padding optional), its bytes masked and
 * encoded again over the same characters, then masked as text. Should memory run out, a
 * string is starred whole. The matchers it needs are made at the first call and kept with the
 * masker (wiped after each head), so later heads allocate nothing; it does not touch the body
 * stream's state, so it may come between feeds (trailers). */
size_t mask_head(struct mask *m, struct http_head *h);

enum mask_coding {
    MASK_CODING_IDENTITY = 0,
    MASK_CODING_GZIP,
    MASK_CODING_DEFLATE, /* zlib-wrapped, or raw deflate as some servers send */
    MASK_CODING_UNSUPPORTED,
};

/* Content-Encoding value → coding ("identity"/absent → IDENTITY; x-gzip = gzip; a list of
 * several codings or anything else → UNSUPPORTED). */
enum mask_coding mask_coding_parse(const char *value);

struct mask_decoder;

/* A streaming gzip/deflate decoder (zlib). max_ratio/max_out bound decompression bombs.
 * Decoded bytes per response are capped at VG_MASK_DECODE_MAX; one feed decodes to at most
 * about 1032 times its length (deflate's limit), so a caller that wants a smaller bound per
 * call uses mask_decoder_feed_some. NULL for IDENTITY/UNSUPPORTED or out of memory. */
struct mask_decoder *mask_decoder_new(enum mask_coding coding);

/* The same with a lower cap on decoded bytes (min(max_out, VG_MASK_DECODE_MAX)). */
struct mask_decoder *mask_decoder_new_capped(enum mask_coding coding, size_t max_out);
void mask_decoder_free(struct mask_decoder **dp);

/*
 * Decodes len bytes, appending decoded bytes to out. 0, or -1 on corrupt input or when the
 * decoded size passes VG_MASK_DECODE_MAX (the caller then aborts the response).
 */
int mask_decoder_feed(struct mask_decoder *d, const char *data, size_t len, struct evbuffer *out);

/*
 * The same with backpressure: decodes until len bytes are used up or out_max decoded bytes were
 * appended, and sets *consumed to the input bytes used (the caller keeps the rest). Returns 0
 * when all input was used and all output produced, 1 when it stopped at out_max (call again
 * with data + *consumed, even when nothing is left, once out has drained), -1 as above.
 */
int mask_decoder_feed_some(struct mask_decoder *d, const char *data, size_t len,
                           struct evbuffer *out, size_t out_max, size_t *consumed);

/* End of input: 0 if the stream ended cleanly, -1 if it was truncated or corrupt. */
int mask_decoder_finish(struct mask_decoder *d, struct evbuffer *out);

#endif
