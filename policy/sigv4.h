/*
 * sigv4.h - AWS Signature Version 4 (AWS4-HMAC-SHA256) for a request head that vaultgate
 * forwards (SPEC §3 "AWS Signature Version 4"): what a request asks of the signer, the canonical
 * request, and the signature with the real key. Pure: no I/O, no logging; HMAC and SHA-256 from
 * OpenSSL (EVP_Q_mac, EVP_Digest). Every buffer that held a key, a session token or a canonical
 * request (which carries the token) is wiped before it is freed.
 */
#ifndef VG_SIGV4_H
#define VG_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "policy/httphead.h"

/* Hex SHA-256 of an empty payload, and the payload hash of a client that signs no body. */
#define SIGV4_EMPTY_SHA256    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SIGV4_UNSIGNED        "UNSIGNED-PAYLOAD"
#define SIGV4_HEX_LEN         64
#define SIGV4_SIGNED_HEADERS  2048 /* room for the SignedHeaders list (names are capped below) */
#define SIGV4_MAX_SIGNED_HDRS 64   /* distinct header names signed; more is refused */

/* What the client's request asks for. */
enum sigv4_kind {
    SIGV4_BUFFER = 0,    /* the payload hash is vaultgate's: the body is buffered and hashed */
    SIGV4_UNSIGNED_BODY, /* X-Amz-Content-Sha256: UNSIGNED-PAYLOAD: the body streams */
    SIGV4_STREAMING,     /* STREAMING-* payload or aws-chunked: refused (501) */
    SIGV4_PRESIGNED,     /* X-Amz-Signature (or SigV2's Signature + AWSAccessKeyId) in the query:
                            refused (501) */
};

enum sigv4_kind sigv4_classify(const struct http_head *h);

/* The real credentials of one rule (all owned by the caller). */
struct sigv4_key {
    const char *access_key_id;
    const char *secret;
    size_t secret_len;
    const char *region;
    const char *service;
    const char *token; /* session token, or NULL */
    size_t token_len;
};

/*
 * The canonical request of h as AWS defines it: method, canonical URI (derived from the path
 * exactly as forwarded: for s3 those bytes as they are, already encoded once; for other
 * services dot and empty segments resolved and every segment encoded once more, '%' included,
 * nothing decoded first), canonical query (parameters decoded
 * and re-encoded, empty ones dropped, sorted by name then value), the signed headers (host,
 * content-type when present, every x-amz-*; values trimmed, inner runs of spaces collapsed,
 * repeated fields joined with ','), their names, and payload_hash. Writes a new buffer to *out
 * (*outlen bytes plus NUL; free with secmem_free(*out, *outlen + 1)) and the ';'-joined names to
 * signed_headers (SIGV4_SIGNED_HEADERS bytes). 0 or -1 (out of memory, no Host, too many
 * signed headers).
 */
int sigv4_canonical_request(const struct http_head *h, bool s3, const char *payload_hash,
                            char **out, size_t *outlen, char *signed_headers);

/*
 * Signs h in place for key at time now: removes the client's Authorization, X-Amz-Date and
 * X-Amz-Security-Token, and X-Amz-Content-Sha256 unless payload_hash is SIGV4_UNSIGNED (the
 * client's declaration stays); adds X-Amz-Date, X-Amz-Security-Token (with a session token),
 * X-Amz-Content-Sha256 (for s3, or kept when unsigned) and Authorization. payload_hash is 64
 * lower-case hex digits or SIGV4_UNSIGNED. The signature's hex goes to sig_hex (65 bytes) for
 * reflection masking. 0 or -1 (h may be partly changed then: do not forward it).
 */
int sigv4_sign(struct http_head *h, const struct sigv4_key *key, const char *payload_hash,
               time_t now, char sig_hex[SIGV4_HEX_LEN + 1]);

/* Incremental SHA-256 of a payload: new context (NULL when out of memory), update, final hex
 * (frees the context and NULLs *ctx). */
struct sigv4_hash;
struct sigv4_hash *sigv4_hash_new(void);
int sigv4_hash_update(struct sigv4_hash *c, const void *data, size_t len);
int sigv4_hash_final(struct sigv4_hash **c, char hex[SIGV4_HEX_LEN + 1]);
void sigv4_hash_free(struct sigv4_hash **c);

#endif
