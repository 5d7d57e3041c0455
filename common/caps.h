/*
 * caps.h - every size limit of vaultgate in one place.
 *
 * Each growable buffer and each input the product accepts has a named cap here, so a reader can
 * see the worst case of memory per connection and per vault without reading the code.
 */
#ifndef VG_CAPS_H
#define VG_CAPS_H

/* Vault file (SPEC §3). */
#define VG_VAULT_MAX_BYTES       (1024 * 1024)
#define VG_VAULT_MAX_RULES       1024
#define VG_VAULT_MAX_HOST_ENTRIES 4096
#define VG_VAULT_MAX_SECRETS     256
#define VG_SECRET_MAX_BYTES      8192
#define VG_SECRET_FILE_MAX_BYTES (64 * 1024)
#define VG_SECRET_NAME_MAX       64
#define VG_RUN_ID_MAX            128
#define VG_PATTERN_MAX           1024

/* Host names: RFC 1035 limits; an IPv6 literal in text form fits as well. */
#define VG_HOST_MAX              253
#define VG_LABEL_MAX             63

/* PCRE2 match limits for `re:` host patterns. */
#define VG_REGEX_MATCH_LIMIT     10000
#define VG_REGEX_DEPTH_LIMIT     1000

/* HTTP/1.1 request and response heads (SPEC §4). */
#define VG_HEAD_MAX_BYTES        (64 * 1024)
#define VG_HEAD_MAX_FIELDS       100
#define VG_CHUNK_EXT_MAX         4096

/* Certificate cache (SPEC §5). */
#define VG_CERTCACHE_MIN         4096

#endif
