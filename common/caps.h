/*
 * caps.h - every size limit of vaultgate in one place.
 *
 * Each growable buffer and each input the product accepts has a named cap here, so a reader can
 * see the worst case of memory per connection and per vault without reading the code.
 */
#ifndef VG_CAPS_H
#define VG_CAPS_H

/* Vault file (SPEC §3). */
#define VG_VAULT_MAX_BYTES        (1024 * 1024)
#define VG_VAULT_MAX_RULES        1024
#define VG_VAULT_MAX_HOST_ENTRIES 4096
#define VG_VAULT_MAX_SECRETS      256
#define VG_SECRET_MAX_BYTES       8192
#define VG_SECRET_FILE_MAX_BYTES  (64 * 1024)
#define VG_SECRET_NAME_MAX        64
#define VG_RUN_ID_MAX             128
#define VG_PATTERN_MAX            1024
#define VG_SCOPE_MAX_METHODS      16 /* methods of one rule's scope */
#define VG_SCOPE_MAX_PATHS        64 /* path prefixes of one rule's scope */

/* Host names: RFC 1035 limits; an IPv6 literal in text form fits as well. */
#define VG_HOST_MAX  253
#define VG_LABEL_MAX 63

/* PCRE2 match limits for `re:` host patterns. */
#define VG_REGEX_MATCH_LIMIT 10000
#define VG_REGEX_DEPTH_LIMIT 1000

/* HTTP/1.1 request and response heads (SPEC §4). */
#define VG_HEAD_MAX_BYTES  (64 * 1024)
#define VG_HEAD_MAX_FIELDS 100
#define VG_CHUNK_EXT_MAX   4096

/* Certificate cache (SPEC §5). */
#define VG_CERTCACHE_MIN 4096

/* Audit (SPEC §6): distinct pending keys (blocked hosts and host/route pairs) per worker table
 * and in the writer's merged table; past it new keys count under the host "(overflow)". */
#define VG_AUDIT_MAX_PENDING_KEYS 100000
/* Rows one audit_query may return (vaultgate audit, /v1/blocked-hosts, /v1/egress-routes). */
#define VG_AUDIT_QUERY_MAX_ROWS 1000000

/* Metrics: distinct secret-name label values (metrics.h promises VG_VAULT_MAX_SECRETS*4). */
#define VG_METRICS_MAX_SECRETS (VG_VAULT_MAX_SECRETS * 4)

/* Admin API (SPEC §7). Admin requests carry no body, so there is no body limit. */
#define VG_ADMIN_MAX_HEAD_BYTES 8192
#define VG_ADMIN_MAX_CONNS      64 /* open connections; past it accepting pauses */
/* Rows of each table on the status page (the largest counts; the JSON endpoints have all). */
#define VG_ADMIN_PAGE_MAX_ROWS 100

/* Proxy connections (proxy/conn.c, proxy/listen.c). */
#define VG_CONN_OUT_CAP      (256 * 1024) /* output past this pauses reading the other side */
#define VG_CONN_IN_MAX       (256 * 1024) /* read high watermark of each side's input */
#define VG_WORKER_MASKS      1024 /* maskers a worker keeps for the next credentialed requests */
#define VG_WORKER_MASK_BYTES (2 << 20) /* ... and at most 2 MiB of them (mask_mem) */
#define VG_WORKER_MASK_SETS  16        /* rules whose masker tables a worker keeps (mask_set) */
#define VG_WORKER_SPARES     64   /* request parsers and stage buffers a worker keeps for reuse */
#define VG_WORKER_ORIGINS    1024 /* spare origins (response parser, stage) a worker keeps */
#define VG_WORKER_EXCHANGES  1024 /* spare exchanges (timer, scratch buffer) a worker keeps */
#define VG_WORKER_H2_STREAMS 1024 /* spare HTTP/2 client streams (buffers, head storage) kept */
#define VG_H2_PATH_KEEP      1024 /* bytes of an HTTP/2 request's :path buffer a stream keeps */
/* A cancelled request's HTTP/1.1 response is read to its end to keep the connection: at most
 * this many body bytes, and this long without input (proxy/origin_h1.c) */
#define VG_ORIGIN_DRAIN_MAX   (64 * 1024)
#define VG_ORIGIN_DRAIN_MS    1000
#define VG_LISTEN_BACKLOG     4096
#define VG_WORKERS_MAX        256
#define VG_LISTENERS_MAX      32
#define VG_STOP_GRACE_SECONDS 10 /* SIGTERM: in-flight requests get this long to finish */
/* Concurrent client connections over all workers (--max-connections). The default takes
 * RLIMIT_NOFILE, keeps VG_CONN_FD_RESERVE descriptors (listeners, admin, audit, log, the
 * over-limit answers) and allows two descriptors per connection (client + upstream). Past the
 * limit up to VG_CONN_BUSY_RESERVE more connections are accepted only to be answered 503
 * (a TLS client needs a handshake to read it); beyond that an accepted socket is closed. */
#define VG_CONN_FD_RESERVE   128
#define VG_CONN_BUSY_RESERVE 64
#define VG_CONN_MAX_LIMIT    1000000

/* DNS listeners (SPEC §12, proxy/dns.c), per worker: query connections open (past it the least
 * recently active is closed), answers waiting for a busy UDP socket (past it they are dropped;
 * the client asks again), datagrams read per wake-up, a connection's unread answers (past it
 * its queries wait), and the idle time that closes a query connection. */
#define VG_DNS_TCP_CONNS        256
#define VG_DNS_UDP_QUEUE        256
#define VG_DNS_UDP_BURST        64
#define VG_DNS_TCP_OUT_MAX      (16 * 1024)
#define VG_DNS_TCP_IDLE_SECONDS 10

/* HTTP/2 (SPEC §10, proxy/h2conn.c). A stream's response waits in a buffer of its own of at most
 * VG_H2_STREAM_OUT_CAP bytes (the rest stays in the upstream's socket); a stream's request body
 * is bounded by its flow-control window (VG_H2_STREAM_WINDOW): a slow stream stalls only
 * itself. Floods are counted per connection over VG_H2_FLOOD_WINDOW seconds. */
#define VG_H2_MAX_STREAMS      100
#define VG_H2_HPACK_TABLE      4096
#define VG_H2_STREAM_OUT_CAP   (64 * 1024)
#define VG_H2_STREAM_WINDOW    (64 * 1024)
#define VG_H2_HEADER_BLOCK_MAX (VG_HEAD_MAX_BYTES + 32 * VG_HEAD_MAX_FIELDS + 16 * 1024)
#define VG_H2_FLOOD_WINDOW     10
#define VG_H2_MAX_SETTINGS     100 /* SETTINGS frames per flood window */
#define VG_H2_MAX_PINGS        100
#define VG_H2_MAX_PRIORITY     1000
#define VG_H2_MAX_EMPTY_DATA   1000 /* DATA frames without payload or END_STREAM */
#define VG_H2_MAX_RESETS       100  /* streams reset by the client, beyond twice those completed */
#define VG_GRPC_MESSAGE_MAX    (64 * 1024 * 1024) /* a gRPC message a credentialed response masks */

/* SigV4 re-signing (SPEC §3): a body vaultgate hashes before signing is buffered, at most
 * VG_SIGV4_BODY_MAX bytes (413 above), in blocks of VG_SIGV4_BLOCK bytes (one block of the
 * announced size for a Content-Length body); all buffered bodies of the process together stay
 * under VG_SIGV4_BUFFER_TOTAL (503 past it), so a sandbox cannot make the gateway hold more. */
#define VG_SIGV4_BODY_MAX     (32 * 1024 * 1024)
#define VG_SIGV4_BLOCK        (256 * 1024)
#define VG_SIGV4_BUFFER_TOTAL ((size_t)512 * 1024 * 1024)

/* OAuth 2.0 tokens (SPEC §3, proxy/oauth.c): at most VG_OAUTH_ANSWER_MAX bytes of a token
 * endpoint's answer are read; a failed fetch is retried after 1, 2, 4 ... at most
 * VG_OAUTH_BACKOFF_MAX seconds; a 401 drops a token at most once per VG_OAUTH_REJECT_INTERVAL
 * seconds per source (an upstream that refuses every token cannot make vaultgate hammer the
 * token endpoint); a request waits for a token at most VG_OAUTH_WAIT_MAX seconds beyond the
 * fetch's own deadline. */
#define VG_OAUTH_ANSWER_MAX      (64 * 1024)
#define VG_OAUTH_BACKOFF_MAX     30
#define VG_OAUTH_REJECT_INTERVAL 10
#define VG_OAUTH_WAIT_MAX        5
/* One fetch may take the connect and TLS timeouts and this many seconds more for its answer. */
#define VG_OAUTH_FETCH_EXTRA 10

/* Reflection masking (SPEC §4, mask/mask.c). The forms of a secret are the secret itself,
 * base64 of user:secret (user <= 256: at most 11 268 bytes) and the secret's base64 forms (at
 * most 10 923); a form may be up to three times the longest secret. The masker finds every spelling
 * of a form itself, up to six bytes per byte of it. Decoded gzip/deflate output per response is
 * capped: past it the response is aborted. */
#define VG_MASK_FORM_MAX   (3 * VG_SECRET_MAX_BYTES)
#define VG_MASK_DECODE_MAX ((size_t)1 << 30)

/* Retired values of a secret (common/sechist.c, SPEC §4): every value a secret held is masked
 * until exit, each adding its forms to the masker of that secret's responses. An OAuth token is
 * dropped after a 401 only while fewer than VG_SECRET_HISTORY_LIVE of its earlier tokens are
 * still within their lifetime (past that the token stays: a sandbox that provokes 401s cannot
 * grow the history, and so the masker, without bound). One masker takes at most
 * VG_MASK_FORMS_MAX forms; a request whose secret has more is refused (500). */
#define VG_SECRET_HISTORY_LIVE 8
#define VG_MASK_FORMS_MAX      1024

#endif
