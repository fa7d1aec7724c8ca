package server_test

import (
	"net/http"
	"testing"
)

// TestHTTPAllowAnswersUnchanged pins the exact answers of /v1/allow to valid requests of both
// forms, as they were before the strict decoding and the request-rule checks, which change
// none of them; but for a cost above the capacity in the descriptors form ("tiered" with
// hits_addend 3 over a burst of 2), which answered retry_after_ms 0 and now -1, "never", as
// the key form does, with a reset_after_ms of the period rather than 0 (issue 30). The descriptors form follows the RLS statuses, which since issue 11 are
// envoyproxy/ratelimit's: whole seconds (rounded up) and 0 remaining when over the limit.
func TestHTTPAllowAnswersUnchanged(t *testing.T) {
	h := start(t, goldenRules)
	steps := [][2]string{
		{`{"key":"alice","rule":{"algorithm":"fixed_window","limit":2,"period":"1m"}}`, `{"allowed":true,"limit":2,"remaining":1,"retry_after_ms":0,"reset_after_ms":60000}`},
		{`{"key":"alice","rule":{"algorithm":"fixed_window","limit":2,"period":"1m"}}`, `{"allowed":true,"limit":2,"remaining":0,"retry_after_ms":0,"reset_after_ms":60000}`},
		{`{"key":"alice","rule":{"algorithm":"fixed_window","limit":2,"period":"1m"}}`, `{"allowed":false,"limit":2,"remaining":0,"retry_after_ms":60000,"reset_after_ms":60000}`},
		{`{"key":"bob","rule":{"limit":5,"period":"1s"},"n":0}`, `{"allowed":true,"limit":5,"remaining":5,"retry_after_ms":0,"reset_after_ms":0}`},
		{`{"key":"carol","rule":{"algorithm":"token_bucket","limit":10,"period":"1s","burst":20},"n":15}`, `{"allowed":true,"limit":20,"remaining":5,"retry_after_ms":0,"reset_after_ms":1500}`},
		{`{"key":"carol","rule":{"algorithm":"token_bucket","limit":10,"period":"1s","burst":20},"n":15}`, `{"allowed":false,"limit":20,"remaining":5,"retry_after_ms":1000,"reset_after_ms":1500}`},
		{`{"key":"dave","rule":{"algorithm":"sliding_log","limit":3,"period":"1s"},"n":2}`, `{"allowed":true,"limit":3,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000}`},
		{`{"key":"dave","rule":{"algorithm":"sliding_log","limit":3,"period":"1s"},"n":2}`, `{"allowed":false,"limit":3,"remaining":1,"retry_after_ms":1000,"reset_after_ms":1000}`},
		{`{"key":"erin","rule":{"algorithm":"gcra","limit":3,"period":"1s"},"n":1}`, `{"allowed":true,"limit":3,"remaining":2,"retry_after_ms":0,"reset_after_ms":333}`},
		{`{"key":"erin","rule":{"algorithm":"leaky_bucket","limit":3,"period":"1s","burst":1},"n":1}`, `{"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":333}`},
		{`{"key":"é\u00e9😀","rule":{"limit":1,"period":"1s","sub_windows":10}}`, `{"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":1100}`},
		{` { "n" : 1 , "key" : "frank" , "rule" : { "period" : "1s" , "limit" : 1 } } `, `{"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000}`},
		{`{"key":"grace","rule":{"limit":1,"period":"1s"},"n":null}`, `{"allowed":true,"limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"h"}]}],"hits_addend":2}`, `{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000,"descriptors":[{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"h"}]}],"hits_addend":2}`, `{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"h"}]}],"hits_addend":0}`, `{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"path","value":"/login"},{"key":"user","value":"eve"}]},{"entries":[{"key":"static","value":"x"}]}]}`, `{"allowed":true,"code":"OK","limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":7200000,"descriptors":[{"allowed":true,"code":"OK","limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":7200000},{"allowed":true,"code":"OK","limit":-1,"remaining":-1,"retry_after_ms":0,"reset_after_ms":0}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"path","value":"/login"},{"key":"user","value":"eve"}]},{"entries":[{"key":"nope","value":"x"}]}]}`, `{"allowed":false,"code":"OVER_LIMIT","limit":1,"remaining":0,"retry_after_ms":7200000,"reset_after_ms":7200000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":1,"remaining":0,"retry_after_ms":7200000,"reset_after_ms":7200000},{"allowed":true,"code":"OK","limit":-1,"remaining":-1,"retry_after_ms":0,"reset_after_ms":0}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"shadow","value":"s"}]},{"entries":[{"key":"shadow","value":"s"}]}]}`, `{"allowed":true,"code":"OK","limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000,"descriptors":[{"allowed":true,"code":"OK","limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000},{"allowed":true,"code":"OK","limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"tiered","value":"t"}]}],"hitsAddend":3}`, `{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":-1,"reset_after_ms":1000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":-1,"reset_after_ms":1000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"o"}],"limit":{"requests_per_unit":1,"unit":"MINUTE","unit_multiplier":2}}]}`, `{"allowed":true,"code":"OK","limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":240000,"descriptors":[{"allowed":true,"code":"OK","limit":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":240000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"o"}],"limit":{"requestsPerUnit":1,"unit":"MINUTE"}}]}`, `{"allowed":false,"code":"OVER_LIMIT","limit":1,"remaining":0,"retry_after_ms":120000,"reset_after_ms":120000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":1,"remaining":0,"retry_after_ms":120000,"reset_after_ms":120000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"static","value":"x"}]}]}`, `{"allowed":true,"code":"OK","limit":-1,"remaining":-1,"retry_after_ms":0,"reset_after_ms":0,"descriptors":[{"allowed":true,"code":"OK","limit":-1,"remaining":-1,"retry_after_ms":0,"reset_after_ms":0}]}`},
	}
	for _, st := range steps {
		if code, got := h.post(t, "/v1/allow", st[0]); code != http.StatusOK || got != st[1]+"\n" {
			t.Errorf("%s:\n got %d %s\nwant %s", st[0], code, got, st[1])
		}
	}
}
