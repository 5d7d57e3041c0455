/*
 * reason.h - the names vaultgate gives to what happened: RFC 9209 Proxy-Status error types for
 * its own responses, and the fixed reason codes of its log lines. One place, so a grep for a
 * code finds every use and no log line carries free text where a code belongs.
 */
#ifndef VG_REASON_H
#define VG_REASON_H

/* Proxy-Status error types (RFC 9209 §2.3). */
#define VG_PS_REQUEST_DENIED     "http_request_denied"
#define VG_PS_REQUEST_ERROR      "http_request_error"
#define VG_PS_UPGRADE_FAILED     "http_upgrade_failed"
#define VG_PS_INTERNAL_ERROR     "proxy_internal_error"
#define VG_PS_CONNECTION_TIMEOUT "connection_timeout"
#define VG_PS_RESPONSE_TIMEOUT   "http_response_timeout"
#define VG_PS_PROTOCOL_ERROR     "http_protocol_error"
#define VG_PS_CONTENT_CODING     "http_response_content_coding"
#define VG_PS_INCOMPLETE         "http_response_incomplete"
#define VG_PS_TERMINATED         "connection_terminated"
#define VG_PS_CONN_LIMIT         "connection_limit_reached"
#define VG_PS_DNS_ERROR          "dns_error"
#define VG_PS_IP_PROHIBITED      "destination_ip_prohibited"
#define VG_PS_CONN_REFUSED       "connection_refused"
#define VG_PS_TLS_CERT_ERROR     "tls_certificate_error"
#define VG_PS_TLS_PROTOCOL_ERROR "tls_protocol_error"
#define VG_PS_DEST_UNAVAILABLE   "destination_unavailable"

/* Reason codes of request log lines and refusals. */
#define VG_R_BLOCKED           "blocked"
#define VG_R_OUT_OF_SCOPE      "out_of_scope"
#define VG_R_NONCANONICAL      "noncanonical_path"
#define VG_R_SIGV4_PRESIGNED   "sigv4_presigned"
#define VG_R_SIGV4_STREAMING   "sigv4_streaming"
#define VG_R_SIGV4_TOO_LARGE   "sigv4_body_too_large"
#define VG_R_SIGV4_BUDGET      "sigv4_buffers_full"
#define VG_R_OAUTH_FAILED      "oauth_token_endpoint_failed"
#define VG_R_OAUTH_WAIT        "oauth_token_wait_timeout"
#define VG_R_METHOD            "method"
#define VG_R_MISDIRECTED       "misdirected"
#define VG_R_BAD_REQUEST       "bad_request"
#define VG_R_PROTOCOL_ERROR    "protocol_error"
#define VG_R_UPGRADE           "upgrade"
#define VG_R_HEAD              "head"
#define VG_R_INJECT            "inject"
#define VG_R_OOM               "oom"
#define VG_R_CONNECT           "connect"
#define VG_R_CONNECT_PORT      "connect_port"
#define VG_R_FORBIDDEN_PORT    "forbidden_port"
#define VG_R_CONN_LIMIT        "connection_limit"
#define VG_R_UPSTREAM_GET      "upstream_get"
#define VG_R_UPSTREAM_TIMEOUT  "upstream_timeout"
#define VG_R_UPSTREAM_PROTOCOL "upstream_protocol"
#define VG_R_UPSTREAM_EOF      "upstream_eof"
#define VG_R_UPSTREAM_IO       "upstream_io"
#define VG_R_CLIENT_CLOSED     "client_closed"
#define VG_R_WEBSOCKET         "websocket"
#define VG_R_WEBSOCKET_EXT     "websocket_extension"
#define VG_R_PROBE             "probe"

#endif
