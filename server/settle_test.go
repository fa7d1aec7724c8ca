package server_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/server"
)

// TestHTTPSettle pins the answers of POST /v1/settle, both forms: a charge past the limit is
// allowed and puts the key in debt (remaining 0, retry_after_ms until it is paid), which
// /v1/allow then denies; a negative delta (or is_negative_hits) refunds; a named limit of
// several rules settles each of them.
func TestHTTPSettle(t *testing.T) {
	h := start(t, goldenRules)
	fixed := `"rule":{"algorithm":"fixed_window","limit":2,"period":"1m"}`
	steps := [][3]string{
		{"/v1/allow", `{"key":"s",` + fixed + `}`, `{"allowed":true,"limit":2,"remaining":1,"retry_after_ms":0,"reset_after_ms":60000}`},
		{"/v1/settle", `{"key":"s",` + fixed + `,"delta":3}`, `{"allowed":true,"limit":2,"remaining":0,"retry_after_ms":60000,"reset_after_ms":60000}`},
		{"/v1/allow", `{"key":"s",` + fixed + `}`, `{"allowed":false,"limit":2,"remaining":0,"retry_after_ms":60000,"reset_after_ms":60000}`},
		{"/v1/settle", `{"key":"s",` + fixed + `,"delta":-3}`, `{"allowed":true,"limit":2,"remaining":1,"retry_after_ms":0,"reset_after_ms":60000}`},
		{"/v1/settle", `{"key":"s",` + fixed + `,"delta":0}`, `{"allowed":true,"limit":2,"remaining":1,"retry_after_ms":0,"reset_after_ms":60000}`},
		// token bucket 2/s burst 2 (4 used: paid in 1 s) and sliding window 3/30s (4 in the
		// current window: back to 3 when 4 x (1 - f) <= 3, f = 1/4 of the next, at 37.5 s)
		{"/v1/settle", `{"key":"t","rule":"golden.tiered","delta":4}`, `{"allowed":true,"limit":2,"remaining":0,"retry_after_ms":37500,"reset_after_ms":60000}`},
		{"/v1/settle", `{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"q"}]},{"entries":[{"key":"static","value":"x"}]}],"hits_addend":5}`,
			`{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":1600,"reset_after_ms":2000,"descriptors":[{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":1600,"reset_after_ms":2000},{"allowed":true,"code":"OK","limit":-1,"remaining":-1,"retry_after_ms":0,"reset_after_ms":0}]}`},
		// denied (the descriptors form of /v1/allow answers the RLS duration_until_reset)
		{"/v1/allow", `{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"q"}]}]}`,
			`{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000}]}`},
		// a settle of 0 in the descriptors form: hits_addend 0 on the descriptor (on the
		// request, 0 means 1, as in RLS)
		{"/v1/settle", `{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"q"}],"hits_addend":0}]}`,
			`{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":1600,"reset_after_ms":2000,"descriptors":[{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":1600,"reset_after_ms":2000}]}`},
		{"/v1/settle", `{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"q"}],"hits_addend":4,"is_negative_hits":true}]}`,
			`{"allowed":true,"code":"OK","limit":2,"remaining":1,"retry_after_ms":0,"reset_after_ms":2000,"descriptors":[{"allowed":true,"code":"OK","limit":2,"remaining":1,"retry_after_ms":0,"reset_after_ms":2000}]}`},
	}
	for _, st := range steps {
		if code, got := h.post(t, st[0], st[1]); code != http.StatusOK || got != st[2]+"\n" {
			t.Errorf("%s %s:\n got %d %s\nwant %s", st[0], st[1], code, got, st[2])
		}
	}
}

// TestHTTPSettleBadInput: /v1/settle checks its input as /v1/allow does, touching no state.
func TestHTTPSettleBadInput(t *testing.T) {
	h := start(t, goldenRules)
	for name, body := range map[string]string{
		"not JSON":               "{",
		"no delta":               `{"key":"k","rule":{"limit":1,"period":"1s"}}`,
		"n instead of delta":     `{"key":"k","rule":{"limit":1,"period":"1s"},"n":1}`,
		"delta too large":        `{"key":"k","rule":{"limit":1,"period":"1s"},"delta":1000000001}`,
		"refund too large":       `{"key":"k","rule":{"limit":1,"period":"1s"},"delta":-1000000001}`,
		"bad rule":               `{"key":"k","rule":{"limit":0,"period":"1s"},"delta":1}`,
		"key with brace":         `{"key":"a{b}","rule":{"limit":1,"period":"1s"},"delta":1}`,
		"unknown field":          `{"key":"k","rule":{"limit":1,"period":"1s"},"delta":1,"x":1}`,
		"descriptors not a list": `{"domain":"golden","descriptors":"x"}`,
		"sliding log too big":    `{"key":"k","rule":{"algorithm":"sliding_log","limit":5000,"period":"1s"},"delta":1}`,
	} {
		if code, msg := h.post(t, "/v1/settle", body); code != http.StatusBadRequest {
			t.Errorf("/v1/settle %s: %d %.200s", name, code, msg)
		}
	}
	if code, msg := h.post(t, "/v1/allow", `{"key":"k","rule":{"limit":1,"period":"1s"},"delta":1}`); code != http.StatusBadRequest {
		t.Errorf("/v1/allow with delta: %d %.200s", code, msg)
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls for refused requests", n)
	}
	off := start(t, goldenRules, func(c *server.Config) { c.RequestRules = server.RequestRulesOff })
	want := `{"error":"sluice: rule: rules chosen by requests are off on this server (request-rules off)","code":"InvalidArgument"}`
	if code, got := off.post(t, "/v1/settle", `{"key":"a","rule":{"limit":1,"period":"1s"},"delta":1}`); code != http.StatusBadRequest || got != want+"\n" {
		t.Errorf("settle with request rules off: %d %s", code, got)
	}
}
