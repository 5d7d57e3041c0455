/*
 * vault_oauth.c - `oauth2` secret sources (SPEC §3 "OAuth 2.0 access tokens"): the token
 * endpoint, the grant, the client and the other secrets it needs.
 *
 * Guarantees: as vault.c - every error starts with the JSON path of the value at fault and
 * echoes vault strings only through the redactor. A source that parses has an https token URL
 * whose host passed hostname_normalize() (port 443 unless named), exactly the fields its grant
 * needs, and references (client_secret, refresh_token) to static secrets of the same vault,
 * resolved only after every secret was read (a secret may name one that comes after it). A
 * client_id is RFC 6749's VSCHAR (0x20-0x7E, spaces included: the fetch form-encodes it).
 */
#include "policy/vault_int.h"
#include "common/hostport.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OAUTH_URL_MAX  2048
#define OAUTH_TEXT_MAX 1024

static const struct vfield oauth_fields[] = {
    {"token_url", cJSON_String, true},      {"grant", cJSON_String, true},
    {"client_id", cJSON_String, true},      {"client_secret", cJSON_String, false},
    {"refresh_token", cJSON_String, false}, {"client_auth", cJSON_String, false},
    {"scope", cJSON_String, false},         {"audience", cJSON_String, false},
};
enum { OA_URL, OA_GRANT, OA_ID, OA_SECRET, OA_REFRESH, OA_AUTH, OA_SCOPE, OA_AUDIENCE, OA_N };

/* 1 when s is 1..max bytes of visible ASCII (and spaces when spaces). */
static int text_ok(const char *s, size_t max, bool spaces)
{
    size_t n = strlen(s);

    if (n < 1 || n > max)
        return 0;
    for (; *s != '\0'; s++) {
        if (!((*s >= 0x21 && *s <= 0x7e) || (spaces && *s == ' ')))
            return 0;
    }
    return 1;
}

/* https://host[:port][/path][?query], no userinfo, no fragment. 0 or -1. */
static int parse_url(struct vctx *c, const char *url, struct vault_oauth *o)
{
    struct hostport hp;
    const char *auth, *end;
    char q[VAULT_QUOTE_BUF];

    vault_quote(q, sizeof(q), url);
    if (!text_ok(url, OAUTH_URL_MAX, false) || strncasecmp(url, "https://", 8) != 0)
        return vault_err(c, "expected an https:// URL, got %s", q);
    auth = url + 8;
    end = auth + strcspn(auth, "/?#");
    if (memchr(auth, '@', (size_t)(end - auth)) != NULL)
        return vault_err(c, "userinfo in the URL is not allowed (client credentials go in "
                            "client_id and client_secret)");
    if (strchr(url, '#') != NULL)
        return vault_err(c, "a fragment in the URL is not allowed");
    if (hostport_parse(auth, (size_t)(end - auth), 0, &hp) != 0)
        return vault_err(c, "expected https://HOST[:PORT]/PATH, got %s", q);
    o->port = hp.has_port ? hp.port : 443;
    o->host = strdup(hp.host);
    if (*end == '\0')
        o->target = strdup("/");
    else if (*end == '?') {
        if ((o->target = malloc(strlen(end) + 2)) != NULL) {
            o->target[0] = '/';
            strcpy(o->target + 1, end);
        }
    } else
        o->target = strdup(end);
    o->token_url = strdup(url);
    if (o->host == NULL || o->target == NULL || o->token_url == NULL)
        return vault_err(c, "out of memory");
    return 0;
}

/* The grant-dependent fields: which must be there, which must not. */
static int check_grant(struct vctx *c, const cJSON **f, struct vault_oauth *o)
{
    static const char *const names[] = {"client_credentials", "refresh_token"};
    size_t old;

    old = vault_path_key(c, "grant");
    if (strcmp(f[OA_GRANT]->valuestring, names[0]) != 0 &&
        strcmp(f[OA_GRANT]->valuestring, names[1]) != 0)
        return vault_err(c, "expected one of client_credentials, refresh_token");
    o->refresh_grant = strcmp(f[OA_GRANT]->valuestring, names[1]) == 0;
    vault_path_pop(c, old);
    if (!o->refresh_grant && f[OA_SECRET] == NULL) {
        vault_path_key(c, "client_secret");
        return vault_err(c, "required for grant \"client_credentials\"");
    }
    if (!o->refresh_grant && f[OA_REFRESH] != NULL) {
        vault_path_key(c, "refresh_token");
        return vault_err(c, "not allowed for grant \"client_credentials\"");
    }
    if (o->refresh_grant && f[OA_REFRESH] == NULL) {
        vault_path_key(c, "refresh_token");
        return vault_err(c, "required for grant \"refresh_token\"");
    }
    old = vault_path_key(c, "client_auth");
    if (f[OA_AUTH] != NULL && strcmp(f[OA_AUTH]->valuestring, "basic") != 0 &&
        strcmp(f[OA_AUTH]->valuestring, "post") != 0)
        return vault_err(c, "expected one of basic, post");
    if (f[OA_AUTH] != NULL && f[OA_SECRET] == NULL)
        return vault_err(c, "needs client_secret (a client without one sends only client_id)");
    o->auth_post = f[OA_AUTH] != NULL && strcmp(f[OA_AUTH]->valuestring, "post") == 0;
    vault_path_pop(c, old);
    return 0;
}

/* Copies an optional text field checked by text_ok. 0 or -1. */
static int take_text(struct vctx *c, const cJSON *it, const char *key, size_t max, bool spaces,
                     char **dst)
{
    size_t old;

    if (it == NULL)
        return 0;
    old = vault_path_key(c, key);
    if (!text_ok(it->valuestring, max, spaces))
        return vault_err(c, "expected 1-%zu visible ASCII characters%s", max,
                         spaces ? " or spaces" : "");
    if ((*dst = strdup(it->valuestring)) == NULL)
        return vault_err(c, "out of memory");
    vault_path_pop(c, old);
    return 0;
}

int vault_parse_oauth(struct vctx *c, const cJSON *obj, struct vault_secret *s)
{
    const cJSON *f[OA_N];
    struct vault_oauth *o;
    size_t old;

    if ((o = calloc(1, sizeof(*o))) == NULL)
        return vault_err(c, "out of memory");
    s->oauth = o;
    o->client_secret = o->refresh_token = SIZE_MAX;
    if (vault_walk_object(c, obj, oauth_fields, OA_N, f) != 0)
        return -1;
    old = vault_path_key(c, "token_url");
    if (parse_url(c, f[OA_URL]->valuestring, o) != 0)
        return -1;
    vault_path_pop(c, old);
    if (check_grant(c, f, o) != 0 ||
        take_text(c, f[OA_ID], "client_id", VAULT_NAME_MAX, true, &o->client_id) != 0 ||
        take_text(c, f[OA_SCOPE], "scope", OAUTH_TEXT_MAX, true, &o->scope) != 0 ||
        take_text(c, f[OA_AUDIENCE], "audience", OAUTH_TEXT_MAX, false, &o->audience) != 0 ||
        take_text(c, f[OA_SECRET], "client_secret", VAULT_NAME_MAX, false, &o->cs_name) != 0 ||
        take_text(c, f[OA_REFRESH], "refresh_token", VAULT_NAME_MAX, false, &o->rt_name) != 0)
        return -1;
    return 0;
}

/* One reference of source i (field key, name) to a static secret. 0 or -1. */
static int resolve_one(struct vctx *c, size_t i, const char *key, const char *name, size_t *idx)
{
    size_t old;

    if (name == NULL)
        return 0;
    old = vault_path_key(c, c->v->secrets[i].name); /* under "secrets" already */
    vault_path_key(c, "oauth2");
    vault_path_key(c, key);
    if (vault_ref_static_secret(c, name, idx) != 0)
        return -1;
    vault_path_pop(c, old);
    return 0;
}

int vault_resolve_oauth(struct vctx *c)
{
    for (size_t i = 0; i < c->v->nsecrets; i++) {
        struct vault_oauth *o = c->v->secrets[i].oauth;

        if (o == NULL)
            continue;
        if (resolve_one(c, i, "client_secret", o->cs_name, &o->client_secret) != 0 ||
            resolve_one(c, i, "refresh_token", o->rt_name, &o->refresh_token) != 0)
            return -1;
    }
    return 0;
}

void vault_oauth_free(struct vault_oauth **op)
{
    struct vault_oauth *o = *op;

    if (o == NULL)
        return;
    free(o->token_url);
    free(o->host);
    free(o->target);
    free(o->client_id);
    free(o->scope);
    free(o->audience);
    free(o->cs_name);
    free(o->rt_name);
    free(o);
    *op = NULL;
}
