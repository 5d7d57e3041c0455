/*
 * test_vault.c - the vault's validation (policy/vault.c, policy/secretsrc.c): one row per error
 * kind, each with its exact JSON path; the size and count limits; secret sources (value, env
 * removed and wiped, file).
 *
 * Secret values in these tests are canaries ("CANARY-..."): every error line is checked not to
 * contain one, and no assertion prints a secret.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/caps.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "tests/unit/vaultq.h"

#define ERRSZ 1024

/* ---- vault: one row per error kind ---- */

#define SEC "'secrets':{'A':{'value':'CANARY-a'}}"
#define RULE(fields)                                                                               \
    "{'version':1," SEC ",'rules':[{'host_pattern':'api.example.com',"                             \
    "'secret':'A'," fields "}]}"
#define RULEP(pat)                                                                                 \
    "{'version':1," SEC ",'rules':[{'host_pattern':'" pat "','secret':'A',"                        \
    "'scheme':'bearer'}]}"

/* an oauth2 source T with the given fields, beside static secrets CS and RT */
#define OAUTH(fields)                                                                              \
    "{'version':1,'secrets':{'T':{'oauth2':{" fields "}},'CS':{'value':'CANARY-cs'},"              \
    "'RT':{'value':'CANARY-rt'}}}"

static const struct {
    const char *json;
    const char *err;
} vault_errors[] = {
    /* syntax and the top level */
    {"", "invalid JSON at line 1, column 1"},
    {"{'version':1,", "invalid JSON at line 1, column 13"},
    {"{'version':1}\n x", "unexpected data after the JSON value at line 2, column 2"},
    {"[]", "(root): expected an object, got an array"},
    {"{}", "version: missing required field"},
    {"{'version':'1'}", "version: expected a number, got a string"},
    {"{'version':2}", "version: expected 1"},
    {"{'version':1.5}", "version: expected 1"},
    {"{'version':1,'version':1}", "version: duplicate field"},
    /* unknown fields at every depth */
    {"{'version':1,'bogus':true}", "bogus: unknown field"},
    {"{'version':1,'run':{'id':'r1','extra':'x'}}", "run.extra: unknown field"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY-a','note':'x'}}}",
     "secrets.A.note: unknown field"},
    {RULE("'scheme':'bearer','extra':1"), "rules[0].extra: unknown field"},
    {"{'version':1,'host_policy':{'defaults':'allow'}}",
     "host_policy.defaults: unknown field; did you mean \"default\"?"},
    {"{'version':1,'host policy':{}}",
     "[\"host policy\"]: unknown field; did you mean \"host_policy\"?"},
    {"{'version':1,'rules':[{'host_patern':'a.example','secret':'A','scheme':'bearer'}]}",
     "rules[0].host_patern: unknown field; did you mean \"host_pattern\"?"},
    {"{'version':1,'run':{'id':'r','USR':'u'}}", "run.USR: unknown field; did you mean \"user\"?"},
    {"{'version':1,'color':1}", "color: unknown field"},
    /* wrong types */
    {"{'version':1,'rules':{}}", "rules: expected an array, got an object"},
    {"{'version':1,'rules':[1]}", "rules[0]: expected an object, got a number"},
    {"{'version':1,'run':[]}", "run: expected an object, got an array"},
    {"{'version':1,'secrets':{'A':'CANARY-a'}}", "secrets.A: expected an object, got a string"},
    {"{'version':1,'secrets':{'A':{'value':7}}}",
     "secrets.A.value: expected a string, got a number"},
    {RULE("'scheme':null"), "rules[0].scheme: expected a string, got null"},
    {"{'version':1,'host_policy':{'hosts':{'a.example.com':true}}}",
     "host_policy.hosts[\"a.example.com\"]: expected a string, got a boolean"},
    /* run */
    {"{'version':1,'run':{'id':'bad id'}}", "run.id: expected 1-128 characters of [A-Za-z0-9._:-]"},
    {"{'version':1,'run':{'id':''}}", "run.id: expected 1-128 characters of [A-Za-z0-9._:-]"},
    {"{'version':1,'run':{'id':'r1','user':'u/7'}}",
     "run.user: expected 1-128 characters of [A-Za-z0-9._:-]"},
    {"{'version':1,'run':{'user':'u-7'}}", "run.id: missing required field"},
    /* secrets */
    {"{'version':1,'secrets':{'lower':{'value':'CANARY-a'}}}",
     "secrets.lower: secret name must match [A-Z][A-Z0-9_]{0,63}"},
    {"{'version':1,'secrets':{'BAD-NAME':{'value':'CANARY-a'}}}",
     "secrets[\"BAD-NAME\"]: secret name must match [A-Z][A-Z0-9_]{0,63}"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY-a'},'A':{'value':'CANARY-b'}}}",
     "secrets.A: duplicate secret name"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY-a','env':'VG_X'}}}",
     "secrets.A: exactly one of value, env, file, oauth2 is required (got 2)"},
    {"{'version':1,'secrets':{'A':{}}}",
     "secrets.A: exactly one of value, env, file, oauth2 is required (got 0)"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY\\r-a'}}}",
     "secrets.A.value: secret has a forbidden byte at offset 6 (only visible ASCII and space; "
     "CR, LF, NUL and other controls are refused)"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY\\n-a'}}}",
     "secrets.A.value: secret has a forbidden byte at offset 6 (only visible ASCII and space; "
     "CR, LF, NUL and other controls are refused)"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY\\u0000-a'}}}",
     "secrets.A.value: secret has a forbidden byte at offset 6 (only visible ASCII and space; "
     "CR, LF, NUL and other controls are refused)"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY\\t-a'}}}",
     "secrets.A.value: secret has a forbidden byte at offset 6 (only visible ASCII and space; "
     "CR, LF, NUL and other controls are refused)"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY\\u007f'}}}",
     "secrets.A.value: secret has a forbidden byte at offset 6 (only visible ASCII and space; "
     "CR, LF, NUL and other controls are refused)"},
    {"{'version':1,'secrets':{'A':{'value':'CANARY\xc3\xa9'}}}",
     "secrets.A.value: secret has a forbidden byte at offset 6 (only visible ASCII and space; "
     "CR, LF, NUL and other controls are refused)"},
    {"{'version':1,'secrets':{'A':{'value':''}}}",
     "secrets.A.value: secret must be 1-8192 bytes, got 0"},
    {"{'version':1,'secrets':{'A':{'file':'/nonexistent/vg-test-secret'}}}",
     "secrets.A.file: cannot read \"/nonexistent/vg-test-secret\": No such file or directory"},
    {"{'version':1,'secrets':{'A':{'file':'relative/secret'}}}",
     "secrets.A.file: expected an absolute path, got \"relative/secret\""},
    {"{'version':1,'secrets':{'A':{'file':'/tmp'}}}",
     "secrets.A.file: cannot read \"/tmp\": not a regular file"},
    {"{'version':1,'secrets':{'A':{'env':'VG_TEST_SURELY_UNSET'}}}",
     "secrets.A.env: environment variable VG_TEST_SURELY_UNSET is not set"},
    {"{'version':1,'secrets':{'A':{'env':'1BAD'}}}",
     "secrets.A.env: expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"},
    /* rules */
    {RULE("'scheme':'bearer'}],'x':[{"), "x: unknown field"},
    {"{'version':1," SEC ",'rules':[{'host_pattern':'api.example.com','secret':'B',"
     "'scheme':'bearer'}]}",
     "rules[0].secret: unknown secret \"B\""},
    {RULE("'scheme':'digest'"),
     "rules[0].scheme: expected one of bearer, basic, header, query, sigv4"},
    {"{'version':1," SEC ",'rules':[{'host_pattern':'api.example.com','secret':'A'}]}",
     "rules[0].scheme: missing required field"},
    {"{'version':1," SEC ",'rules':[{'secret':'A','scheme':'bearer'}]}",
     "rules[0].host_pattern: missing required field"},
    {RULE("'scheme':'header'"), "rules[0].name: required for scheme \"header\""},
    {RULE("'scheme':'query'"), "rules[0].name: required for scheme \"query\""},
    {RULE("'scheme':'basic'"), "rules[0].username: required for scheme \"basic\""},
    {RULE("'scheme':'bearer','name':'x-key'"), "rules[0].name: not allowed for scheme \"bearer\""},
    {RULE("'scheme':'header','name':'x-key','username':'u'"),
     "rules[0].username: not allowed for scheme \"header\""},
    {RULE("'scheme':'basic','username':'u','name':'x'"),
     "rules[0].name: not allowed for scheme \"basic\""},
    {RULE("'scheme':'query','name':'key','username':'u'"),
     "rules[0].username: not allowed for scheme \"query\""},
    /* oauth2 secret sources */
    {OAUTH("'token_url':'https://t.example/token','grant':'client_credentials',"
           "'client_id':'c'"),
     "secrets.T.oauth2.client_secret: required for grant \"client_credentials\""},
    {OAUTH("'token_url':'https://t.example/token','grant':'client_credentials',"
           "'client_id':'c','client_secret':'CS','refresh_token':'RT'"),
     "secrets.T.oauth2.refresh_token: not allowed for grant \"client_credentials\""},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c'"),
     "secrets.T.oauth2.refresh_token: required for grant \"refresh_token\""},
    {OAUTH("'token_url':'https://t.example/token','grant':'password','client_id':'c'"),
     "secrets.T.oauth2.grant: expected one of client_credentials, refresh_token"},
    {OAUTH("'token_url':'http://t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.token_url: expected an https:// URL, got \"http://t.example/token\""},
    {OAUTH("'token_url':'https://u:p@t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.token_url: userinfo in the URL is not allowed (client credentials go in "
     "client_id and client_secret)"},
    {OAUTH("'token_url':'https://t.example/token#x','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.token_url: a fragment in the URL is not allowed"},
    {OAUTH("'token_url':'https://t_x.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.token_url: expected https://HOST[:PORT]/PATH, got "
     "\"https://t_x.example/token\""},
    {OAUTH("'token_url':'https://t.example:0/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.token_url: expected https://HOST[:PORT]/PATH, got "
     "\"https://t.example:0/token\""},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'NOPE'"),
     "secrets.T.oauth2.refresh_token: unknown secret \"NOPE\""},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'T'"),
     "secrets.T.oauth2.refresh_token: needs a secret with a value (value, env or file), not an "
     "oauth2 source"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT','client_auth':'post'"),
     "secrets.T.oauth2.client_auth: needs client_secret (a client without one sends only "
     "client_id)"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT','client_secret':'CS','client_auth':'jwt'"),
     "secrets.T.oauth2.client_auth: expected one of basic, post"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c\\td',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.client_id: expected 1-256 visible ASCII characters or spaces"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c\\u007f',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.client_id: expected 1-256 visible ASCII characters or spaces"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'caf\\u00e9',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.client_id: expected 1-256 visible ASCII characters or spaces"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'',"
           "'refresh_token':'RT'"),
     "secrets.T.oauth2.client_id: expected 1-256 visible ASCII characters or spaces"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT','scope':''"),
     "secrets.T.oauth2.scope: expected 1-1024 visible ASCII characters or spaces"},
    {OAUTH("'token_url':'https://t.example/token','grant':'refresh_token','client_id':'c',"
           "'refresh_token':'RT','resource':'x'"),
     "secrets.T.oauth2.resource: unknown field"},
    {OAUTH("'grant':'refresh_token','client_id':'c','refresh_token':'RT'"),
     "secrets.T.oauth2.token_url: missing required field"},
    {"{'version':1,'secrets':{'T':{'oauth2':{},'value':'x'}}}",
     "secrets.T: exactly one of value, env, file, oauth2 is required (got 2)"},
    {"{'version':1,'secrets':{'T':{'oauth2':{'token_url':'https://t.example/','grant':"
     "'refresh_token','client_id':'c','refresh_token':'RT'}},'RT':{'value':'CANARY-rt'}},"
     "'rules':[{'host_pattern':'api.example.com','secret':'T','scheme':'sigv4',"
     "'access_key_id':'AKID','region':'r','service':'s'}]}",
     "rules[0].secret: sigv4 needs a secret with a value (value, env or file), not an oauth2 "
     "source"},
    /* sigv4 */
    {RULE("'scheme':'sigv4','region':'us-east-1','service':'s3'"),
     "rules[0].access_key_id: required for scheme \"sigv4\""},
    {RULE("'scheme':'sigv4','access_key_id':'AKIDEXAMPLE','service':'s3'"),
     "rules[0].region: required for scheme \"sigv4\""},
    {RULE("'scheme':'sigv4','access_key_id':'AKIDEXAMPLE','region':'us-east-1'"),
     "rules[0].service: required for scheme \"sigv4\""},
    {RULE("'scheme':'bearer','region':'us-east-1'"),
     "rules[0].region: not allowed for scheme \"bearer\""},
    {RULE("'scheme':'basic','username':'u','session_token':'A'"),
     "rules[0].session_token: not allowed for scheme \"basic\""},
    {RULE("'scheme':'sigv4','access_key_id':'AKIDEXAMPLE','region':'us-east-1','service':'s3',"
          "'name':'x'"),
     "rules[0].name: not allowed for scheme \"sigv4\""},
    {RULE("'scheme':'sigv4','access_key_id':'AKID/EXAMPLE','region':'us-east-1','service':'s3'"),
     "rules[0].access_key_id: expected 1-128 characters of [A-Za-z0-9._-]"},
    {RULE("'scheme':'sigv4','access_key_id':'AKIDEXAMPLE','region':'us east','service':'s3'"),
     "rules[0].region: expected 1-64 characters of [A-Za-z0-9._-]"},
    {RULE("'scheme':'sigv4','access_key_id':'AKIDEXAMPLE','region':'us-east-1','service':''"),
     "rules[0].service: expected 1-64 characters of [A-Za-z0-9._-]"},
    {RULE("'scheme':'sigv4','access_key_id':'AKIDEXAMPLE','region':'us-east-1','service':'s3',"
          "'session_token':'NOPE'"),
     "rules[0].session_token: unknown secret \"NOPE\""},
    /* scopes (SPEC §3): methods and paths, any scheme */
    {RULE("'scheme':'bearer','methods':'GET'"),
     "rules[0].methods: expected an array, got a string"},
    {RULE("'scheme':'bearer','methods':[]"), "rules[0].methods: expected 1-16 methods"},
    {RULE("'scheme':'bearer','methods':[1]"),
     "rules[0].methods[0]: expected a string, got a number"},
    {RULE("'scheme':'bearer','methods':['GET','get']"),
     "rules[0].methods[1]: method must be upper case"},
    {RULE("'scheme':'bearer','methods':['GET','GET']"), "rules[0].methods[1]: duplicate method"},
    {RULE("'scheme':'bearer','methods':['GE T']"),
     "rules[0].methods[0]: method is not an RFC 9110 token"},
    {RULE("'scheme':'bearer','methods':['']"),
     "rules[0].methods[0]: method must be 1-32 characters"},
    {RULE("'scheme':'bearer','methods':['TRACE']"),
     "rules[0].methods[0]: method never reaches a rule (CONNECT is decided per host, TRACE is "
     "refused)"},
    {RULE("'scheme':'bearer','methods':['A','B','C','D','E','F','G','H','I','J','K','L','M','N',"
          "'O','P','Q']"),
     "rules[0].methods: expected 1-16 methods"},
    {RULE("'scheme':'bearer','paths':[]"), "rules[0].paths: expected 1-64 paths"},
    {RULE("'scheme':'bearer','paths':['repos']"),
     "rules[0].paths[0]: expected a path of 1-1024 characters starting with '/'"},
    {RULE("'scheme':'bearer','paths':['/a','/a?x']"),
     "rules[0].paths[1]: expected visible ASCII without '?' or '#'"},
    {RULE("'scheme':'bearer','paths':['/a b']"),
     "rules[0].paths[0]: expected visible ASCII without '?' or '#'"},
    {RULE("'scheme':'bearer','paths':['/a/../b']"), "rules[0].paths[0]: dot segment in the path"},
    {RULE("'scheme':'bearer','paths':['/a/.']"), "rules[0].paths[0]: dot segment in the path"},
    {RULE("'scheme':'bearer','paths':['/a\\\\b']"), "rules[0].paths[0]: backslash in the path"},
    {RULE("'scheme':'bearer','paths':['/a%2Fb']"),
     "rules[0].paths[0]: encoded dot, slash or backslash in the path"},
    {RULE("'scheme':'bearer','paths':['/a%zz']"),
     "rules[0].paths[0]: malformed percent-escape in the path"},
    {RULE("'scheme':'bearer','paths':['/a%00']"), "rules[0].paths[0]: encoded NUL in the path"},
    {RULE("'scheme':'bearer','paths':['/a:b','/a%3Ab']"),
     "rules[0].paths[1]: duplicate path (after percent-decoding)"},
    {RULE("'scheme':'basic','username':'a:b'"),
     "rules[0].username: expected 1-256 visible ASCII characters without ':'"},
    {RULE("'scheme':'header','name':'Host'"),
     "rules[0].name: header name is a hop-by-hop, framing or routing header"},
    {RULE("'scheme':'header','name':'transfer-encoding'"),
     "rules[0].name: header name is a hop-by-hop, framing or routing header"},
    {RULE("'scheme':'header','name':'Connection'"),
     "rules[0].name: header name is a hop-by-hop, framing or routing header"},
    {RULE("'scheme':'header','name':'Proxy-Authorization'"),
     "rules[0].name: header name is a hop-by-hop, framing or routing header"},
    {RULE("'scheme':'header','name':'x api key'"),
     "rules[0].name: header name is not an RFC 9110 token"},
    {RULE("'scheme':'header','name':'x-key:'"),
     "rules[0].name: header name is not an RFC 9110 token"},
    {RULE("'scheme':'header','name':''"), "rules[0].name: header name must be 1-256 characters"},
    {RULE("'scheme':'header','name':'x_api_key'"),
     "rules[0].name: header name contains '_' (servers and proxies drop or rewrite such headers)"},
    {RULE("'scheme':'query','name':'a&b'"),
     "rules[0].name: expected 1-256 characters of [A-Za-z0-9._~-]"},
    /* host patterns */
    {RULEP("*"), "rules[0].host_pattern: \"*\" is too broad for a rule: \"*\" matches every host"},
    {RULEP("*.com"), "rules[0].host_pattern: \"*.com\" is too broad for a rule: \"*.com\" matches "
                     "a whole top-level domain"},
    {RULEP("*.co.uk"), "rules[0].host_pattern: \"*.co.uk\" is too broad for a rule: \"*.co.uk\" "
                       "matches a whole public suffix"},
    {RULEP("re:.*"), "rules[0].host_pattern: \"re:.*\" is too broad for a rule: regular "
                     "expression matches every single-label name tried"},
    {RULEP("re:[a-z0-9-]+\\\\.com"),
     "rules[0].host_pattern: \"re:[a-z0-9-]+\\\\.com\" is too broad for a rule: regular "
     "expression matches every name tried under .com"},
    {RULEP("re:("), "rules[0].host_pattern: \"re:(\": bad regular expression at offset 1: "
                    "missing closing parenthesis"},
    {RULEP("api.example.com:443"), "rules[0].host_pattern: \"api.example.com:443\": expected a "
                                   "host name, *.domain wildcard, IP literal or re:<regex>"},
    {RULEP(""), "rules[0].host_pattern: \"\": empty host pattern"},
    /* host_policy */
    {"{'version':1,'host_policy':{'default':'deny'}}",
     "host_policy.default: expected one of allow, block"},
    {"{'version':1,'host_policy':{'enforce':'false'}}",
     "host_policy.enforce: expected a boolean, got a string"},
    {"{'version':1,'host_policy':{'enforce':0}}",
     "host_policy.enforce: expected a boolean, got a number"},
    {"{'version':1,'host_policy':{'enforce':null}}",
     "host_policy.enforce: expected a boolean, got null"},
    {"{'version':1,'host_policy':{'enforce':true,'enforce':false}}",
     "host_policy.enforce: duplicate field"},
    {"{'version':1,'host_policy':{'enforced':false}}",
     "host_policy.enforced: unknown field; did you mean \"enforce\"?"},
    {"{'version':1,'host_policy':{'hosts':{'a.example.com':'deny'}}}",
     "host_policy.hosts[\"a.example.com\"]: expected one of allow, block"},
    {"{'version':1,'host_policy':{'hosts':{'a b':'block'}}}",
     "host_policy.hosts[\"a b\"]: \"a b\": expected a host name, *.domain wildcard, IP literal or "
     "re:<regex>"},
    {"{'version':1,'host_policy':{'hosts':{'a.example.com':'allow','A.Example.com.':'block'}}}",
     "host_policy.hosts[\"A.Example.com.\"]: same host pattern as "
     "host_policy.hosts[\"a.example.com\"]"},
    {"{'version':1,'host_policy':{'hosts':{'11.0.0.2':'block','[64:ff9b::b00:2]':'allow'}}}",
     "host_policy.hosts[\"[64:ff9b::b00:2]\"]: same host pattern as "
     "host_policy.hosts[\"11.0.0.2\"]"},
    {"{'version':1,'host_policy':{'hosts':[]}}",
     "host_policy.hosts: expected an object, got an array"},
    /* a credential pasted into the wrong field is echoed masked, the path still named */
    {"{'version':1,'secrets':{'A':{'file':'sk-proj-Zq8Ck3'}}}",
     "secrets.A.file: expected an absolute path, got \"**************\""},
    {"{'version':1,'secrets':{'A':{'file':'/run/ghp_Zq8Ck3'}}}",
     "secrets.A.file: cannot read \"***************\": No such file or directory"},
    {"{'version':1,'secrets':{'A':{'env':'ghp_Zq8Ck3Lp9'}}}",
     "secrets.A.env: environment variable ************* is not set"},
    {"{'version':1,'secrets':{'sk-proj-Zq8':{'value':'CANARY-a'}}}",
     "secrets[\"***********\"]: secret name must match [A-Z][A-Z0-9_]{0,63}"},
    {"{'version':1,'ghp_Zq8Ck3':1}", "[\"**********\"]: unknown field"},
    {"{'version':1," SEC ",'rules':[{'host_pattern':'api.example.com',"
     "'secret':'AKIAIOSFODNN7EXAMPLE','scheme':'bearer'}]}",
     "rules[0].secret: unknown secret \"********************\""},
    {RULEP("*.AKIAIOSFODNN7EXAMPLE"),
     "rules[0].host_pattern: \"**********************\" is too broad for a rule"},
    {RULEP("*.Zq8Ck3Lp9Xw2Vb7Nm4RtZq8Ck3Lp9Xw2Vb7Nm4Rt"),
     "rules[0].host_pattern: \"******************************************\" is too broad for a "
     "rule"},
    {"{'version':1,'host_policy':{'hosts':{'sk-proj-Zq8':'maybe'}}}",
     "host_policy.hosts[\"***********\"]: expected one of allow, block"},
};

START_TEST(test_vault_error)
{
    char err[ERRSZ];
    struct policy *p = vaultq_parse(vault_errors[_i].json, err, sizeof(err));

    ck_assert_msg(p == NULL, "row %d accepted", _i);
    ck_assert_str_eq(err, vault_errors[_i].err);
    ck_assert_msg(strstr(err, "CANARY") == NULL, "row %d: error shows a secret", _i);
    ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

/*
 * client_id is RFC 6749's VSCHAR, 0x20-0x7E: a space, ':' and '+' included ("acc:client id+1"),
 * kept as written (the fetch form-encodes it); 256 characters of every VSCHAR load, 257 do not.
 */
START_TEST(test_vault_oauth_client_id)
{
    static const char fmt[] =
        "{\"version\":1,\"secrets\":{\"T\":{\"oauth2\":{\"token_url\":\"https://t.example/"
        "token\",\"grant\":\"client_credentials\",\"client_id\":\"%s\",\"client_secret\":"
        "\"CS\"}},\"CS\":{\"value\":\"CANARY-cs\"}},\"rules\":[{\"host_pattern\":\"a.example."
        "com\",\"secret\":\"T\",\"scheme\":\"bearer\"}]}";
    char id[258], escaped[600], json[1024], err[ERRSZ];
    struct policy_oauth oi;
    struct policy *p;
    size_t o = 0;

    /* every VSCHAR, written in JSON (a quote and a backslash escaped), cycled to 256 */
    for (int i = 0; i < 257; i++)
        id[i] = (char)(0x20 + i % 95);
    id[256] = '\0';
    for (int i = 0; i < 256; i++) {
        if (id[i] == '"' || id[i] == '\\')
            escaped[o++] = '\\';
        escaped[o++] = id[i];
    }
    escaped[o] = '\0';
    for (int k = 0; k < 2; k++) {
        const char *want = k == 0 ? "acc:client id+1" : id;

        snprintf(json, sizeof(json), fmt, k == 0 ? want : escaped);
        p = policy_parse(json, strlen(json), err, sizeof(err));
        ck_assert_msg(p != NULL, "client_id %d refused: %s", k, err);
        ck_assert_uint_eq(policy_oauth_count(p), 1);
        policy_oauth_info(p, 0, &oi);
        ck_assert_str_eq(oi.client_id, want);
        policy_unref(&p);
    }
    /* 257 characters: one too many */
    escaped[o++] = 'x';
    escaped[o] = '\0';
    snprintf(json, sizeof(json), fmt, escaped);
    ck_assert_ptr_null(policy_parse(json, strlen(json), err, sizeof(err)));
    ck_assert_str_eq(err, "secrets.T.oauth2.client_id: expected 1-256 visible ASCII characters or "
                          "spaces");
}
END_TEST

/* Builds a vault with n secrets, rules or host entries; caller frees. */
static char *big_vault(const char *what, int n)
{
    size_t cap = (size_t)n * 128 + 256, o = 0;
    char *s = malloc(cap);

    ck_assert_ptr_nonnull(s);
    o += (size_t)snprintf(s + o, cap - o, "{\"version\":1,\"secrets\":{");
    if (strcmp(what, "secrets") == 0) {
        for (int i = 0; i < n; i++)
            o += (size_t)snprintf(s + o, cap - o, "%s\"S%d\":{\"value\":\"CANARY-%d\"}",
                                  i ? "," : "", i, i);
    } else {
        o += (size_t)snprintf(s + o, cap - o, "\"A\":{\"value\":\"CANARY-a\"}");
    }
    o += (size_t)snprintf(s + o, cap - o, "},\"rules\":[");
    for (int i = 0; strcmp(what, "rules") == 0 && i < n; i++)
        o += (size_t)snprintf(s + o, cap - o,
                              "%s{\"host_pattern\":\"h%d.example.com\",\"secret\":\"A\","
                              "\"scheme\":\"bearer\"}",
                              i ? "," : "", i);
    o += (size_t)snprintf(s + o, cap - o, "],\"host_policy\":{\"hosts\":{");
    for (int i = 0; strcmp(what, "hosts") == 0 && i < n; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s\"h%d.example.com\":\"block\"", i ? "," : "", i);
    snprintf(s + o, cap - o, "}}}");
    return s;
}

static const struct {
    const char *what;
    int max;
    const char *err;
} limit_cases[] = {
    {"secrets", VG_VAULT_MAX_SECRETS, "secrets: more than 256 secrets"},
    {"rules", VG_VAULT_MAX_RULES, "rules: more than 1024 rules"},
    {"hosts", VG_VAULT_MAX_HOST_ENTRIES, "host_policy.hosts: more than 4096 entries"},
};

START_TEST(test_vault_limits)
{
    char err[ERRSZ] = "";
    char *at = big_vault(limit_cases[_i].what, limit_cases[_i].max);
    char *over = big_vault(limit_cases[_i].what, limit_cases[_i].max + 1);
    struct policy *p = policy_parse(at, strlen(at), err, sizeof(err));

    ck_assert_msg(p != NULL, "at the limit: %s", err);
    policy_unref(&p);
    p = policy_parse(over, strlen(over), err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, limit_cases[_i].err);
    free(at);
    free(over);
}
END_TEST

START_TEST(test_vault_secret_lengths)
{
    char *json = malloc(VG_SECRET_MAX_BYTES + 128), err[ERRSZ];
    struct policy *p;
    int n;

    for (int extra = 0; extra <= 1; extra++) {
        n = snprintf(json, 64, "{\"version\":1,\"secrets\":{\"A\":{\"value\":\"");
        memset(json + n, 'C', VG_SECRET_MAX_BYTES + (size_t)extra);
        strcpy(json + n + VG_SECRET_MAX_BYTES + extra, "\"}}}");
        p = policy_parse(json, strlen(json), err, sizeof(err));
        if (extra == 0) {
            ck_assert_msg(p != NULL, "%s", err);
        } else {
            ck_assert_ptr_null(p);
            ck_assert_str_eq(err, "secrets.A.value: secret must be 1-8192 bytes, got 8193");
        }
        policy_unref(&p);
    }
    free(json);
}
END_TEST

START_TEST(test_vault_too_large)
{
    size_t len = VG_VAULT_MAX_BYTES + 1;
    char *json = malloc(len), err[ERRSZ], path[] = "/tmp/vg-test-vault-XXXXXX";
    struct policy *p;
    int fd;

    memset(json, ' ', len);
    memcpy(json, "{\"version\":1}", 13);
    p = policy_parse(json, len, err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, "vault is larger than 1048576 bytes");
    /* exactly 1 MiB is fine */
    p = policy_parse(json, len - 1, err, sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    policy_unref(&p);
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, json, len), (ssize_t)len);
    close(fd);
    p = policy_load(path, err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, "vault is larger than 1048576 bytes");
    unlink(path);
    p = policy_load(path, err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, "cannot read vault: No such file or directory");
    free(json);
}
END_TEST

/* The raw form of rule 0's secret equals want (compared, never printed). */
static void assert_secret(const struct policy *p, int rule, const char *want)
{
    struct inject_form forms[INJECT_MAX_FORMS];
    size_t n = inject_forms(p, rule, forms);

    ck_assert_uint_ge(n, 1);
    ck_assert_msg(forms[0].len == strlen(want) && memcmp(forms[0].bytes, want, forms[0].len) == 0,
                  "rule %d: secret differs from the expected canary", rule);
}

START_TEST(test_vault_env_removed)
{
    const char *json = "{'version':1,'secrets':{'E':{'env':'VG_TEST_ENV_SECRET'}},"
                       "'rules':[{'host_pattern':'api.example.com','secret':'E',"
                       "'scheme':'bearer'}]}";
    char err[ERRSZ];
    struct policy *p;

    ck_assert_int_eq(setenv("VG_TEST_ENV_SECRET", "CANARY-env-5150", 1), 0);
    p = vaultq_parse(json, err, sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    ck_assert_ptr_null(getenv("VG_TEST_ENV_SECRET"));
    assert_secret(p, 0, "CANARY-env-5150");
    policy_unref(&p);
    /* a reload (SIGHUP) finds the variable gone and still gets the value read at start */
    p = vaultq_parse(json, err, sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    assert_secret(p, 0, "CANARY-env-5150");
    ck_assert_ptr_null(getenv("VG_TEST_ENV_SECRET"));
    policy_unref(&p);
}
END_TEST

/* putenv() keeps the caller's bytes in place, as the initial environment block does: the whole
 * entry, name included, must be overwritten there; other variables stay. */
START_TEST(test_vault_env_entry_wiped)
{
    static char entry[] = "VG_TEST_ENV_WIPED=CANARY-env-7a7a";
    const char *json = "{'version':1,'secrets':{'E':{'env':'VG_TEST_ENV_WIPED'}},"
                       "'rules':[{'host_pattern':'api.example.com','secret':'E',"
                       "'scheme':'bearer'}]}";
    char err[ERRSZ];
    struct policy *p;

    ck_assert_int_eq(setenv("VG_TEST_ENV_NEIGHBOUR", "stays", 1), 0);
    ck_assert_int_eq(putenv(entry), 0);
    p = vaultq_parse(json, err, sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    assert_secret(p, 0, "CANARY-env-7a7a");
    for (size_t i = 0; i < sizeof(entry); i++)
        ck_assert_msg(entry[i] == '\0', "byte %zu of the entry survived", i);
    ck_assert_ptr_null(getenv("VG_TEST_ENV_WIPED"));
    ck_assert_str_eq(getenv("VG_TEST_ENV_NEIGHBOUR"), "stays");
    policy_unref(&p);
}
END_TEST

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

START_TEST(test_vault_file_secret)
{
    char path[] = "/tmp/vg-test-secret-XXXXXX", json[256], err[ERRSZ];
    char *big = malloc(VG_SECRET_FILE_MAX_BYTES + 1);
    struct policy *p;
    int fd = mkstemp(path);

    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(json, sizeof(json),
             "{\"version\":1,\"secrets\":{\"F\":{\"file\":\"%s\"}},\"rules\":[{\"host_pattern\":"
             "\"api.example.com\",\"secret\":\"F\",\"scheme\":\"bearer\"}]}",
             path);
    /* one trailing newline is stripped */
    write_file(path, "CANARY-file-77\n", 15);
    p = policy_parse(json, strlen(json), err, sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    assert_secret(p, 0, "CANARY-file-77");
    policy_unref(&p);
    /* only one: a second one is a forbidden byte */
    write_file(path, "CANARY-file-77\n\n", 16);
    p = policy_parse(json, strlen(json), err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err, "secrets.F.file: the secret has a forbidden byte at offset 14") ==
                      err,
                  "%s", err);
    /* over 64 KiB */
    memset(big, 'C', VG_SECRET_FILE_MAX_BYTES + 1);
    write_file(path, big, VG_SECRET_FILE_MAX_BYTES + 1);
    p = policy_parse(json, strlen(json), err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err, ": larger than 65536 bytes") != NULL, "%s", err);
    ck_assert_msg(strncmp(err, "secrets.F.file: cannot read \"/tmp/vg-test-secret-", 47) == 0, "%s",
                  err);
    /* 64 KiB exactly is readable but over the 8 KiB secret limit */
    write_file(path, big, VG_SECRET_FILE_MAX_BYTES);
    p = policy_parse(json, strlen(json), err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, "secrets.F.file: the secret must be 1-8192 bytes, got 65536");
    unlink(path);
    free(big);
}
END_TEST

START_TEST(test_vault_minimal_and_run)
{
    struct policy *p = vaultq_parse_ok("{'version':1}");

    ck_assert_str_eq(policy_run_id(p), "");
    ck_assert_str_eq(policy_run_user(p), "");
    ck_assert_uint_eq(policy_rule_count(p), 0);
    ck_assert_uint_eq(policy_host_entry_count(p), 0);
    ck_assert_uint_eq(policy_secret_count(p), 0);
    policy_unref(&p);
    /* callers may pass no error buffer, and no input */
    ck_assert_ptr_null(policy_parse("{", 1, NULL, 0));
    ck_assert_ptr_null(policy_parse(NULL, 0, NULL, 0));
    ck_assert_ptr_null(policy_load("/nonexistent/vault.json", NULL, 0));
    p = vaultq_parse_ok("{'version':1,'run':{'id':'run-42','user':'u-7'}}");
    ck_assert_str_eq(policy_run_id(p), "run-42");
    ck_assert_str_eq(policy_run_user(p), "u-7");
    policy_unref(&p);
}
END_TEST

/* host_policy.enforce (SPEC §12): true by default, false makes the policy report-only */
START_TEST(test_vault_enforce)
{
    static const struct {
        const char *vault;
        bool report_only;
    } cases[] = {
        {"{'version':1}", false},
        {"{'version':1,'host_policy':{'enforce':true}}", false},
        {"{'version':1,'host_policy':{'enforce':false}}", true},
        {"{'version':1,'host_policy':{'default':'block','enforce':false,'hosts':{}}}", true},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct policy *p = vaultq_parse_ok(cases[i].vault);

        ck_assert_msg(policy_report_only(p) == cases[i].report_only, "%s", cases[i].vault);
        policy_unref(&p);
    }
}
END_TEST

Suite *suite_vault(void);

Suite *suite_vault(void)
{
    Suite *s = suite_create("vault");
    TCase *tc = tcase_create("validate");

    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_vault_error, 0,
                        (int)(sizeof(vault_errors) / sizeof(vault_errors[0])));
    tcase_add_loop_test(tc, test_vault_limits, 0,
                        (int)(sizeof(limit_cases) / sizeof(limit_cases[0])));
    tcase_add_test(tc, test_vault_enforce);
    tcase_add_test(tc, test_vault_secret_lengths);
    tcase_add_test(tc, test_vault_oauth_client_id);
    tcase_add_test(tc, test_vault_too_large);
    tcase_add_test(tc, test_vault_env_removed);
    tcase_add_test(tc, test_vault_env_entry_wiped);
    tcase_add_test(tc, test_vault_file_secret);
    tcase_add_test(tc, test_vault_minimal_and_run);
    suite_add_tcase(s, tc);
    return s;
}
