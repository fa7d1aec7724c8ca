// Package secrettest holds the test that a request's values never leave Sluice raw (issue
// 31, item 2): it drives every door — the library, httplimit, grpclimit, sluice serve's gRPC
// RLS, /json and HTTP API, its forward-auth and ext_authz doors (issue 35), and the proxy —
// with a recognisable secret in the places a request carries API keys, under a failing store
// and with invalid input, and looks for the secret in every log line, span (the raw OTLP
// bodies), metrics page, status and response body. The package has no code of its own.
package secrettest
