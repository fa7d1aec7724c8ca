package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestHTTPAllowStrictJSON: /v1/allow refuses, naming the field and before any store call,
// what encoding/json would accept silently: strings that are not UTF-8 (turned into U+FFFD,
// so "a\xffb" and "a\xfeb" would share a counter) and a field given twice (the last one won),
// at any depth, in both forms.
func TestHTTPAllowStrictJSON(t *testing.T) {
	h := start(t, goldenRules)
	rule := `"rule":{"limit":1,"period":"1s"}`
	for body, want := range map[string]string{
		`{"key":"a` + "\xff" + `b",` + rule + `}`:                                                              "sluice: key: not valid UTF-8",
		`{"key":"a` + "\xed\xa0\x80" + `b",` + rule + `}`:                                                      "sluice: key: not valid UTF-8", // an encoded surrogate
		`{"key":"a\ud800b",` + rule + `}`:                                                                      "sluice: key: not valid UTF-8",
		`{"key":"a\udc00",` + rule + `}`:                                                                       "sluice: key: not valid UTF-8",
		`{"key":"a\ud800\u0041",` + rule + `}`:                                                                 "sluice: key: not valid UTF-8",
		`{"key":"a","rule":{"limit":1,"period":"1` + "\xc3" + `"}}`:                                            "sluice: rule.period: not valid UTF-8",
		`{"key":"a","key":"b",` + rule + `}`:                                                                   "sluice: key: given twice (each field may appear once)",
		`{"key":"a","KEY":"b",` + rule + `}`:                                                                   "sluice: KEY: given twice",
		`{"key":"a",` + rule + `,"n":1,"n":2}`:                                                                 "sluice: n: given twice",
		`{"key":"a","rule":{"limit":1,"limit":1000,"period":"1s"}}`:                                            "sluice: rule.limit: given twice",
		`{"key":"a",` + rule + `,"rule":{"limit":9,"period":"1s"}}`:                                            "sluice: rule: given twice",
		`{"k` + "\xff" + `":1,` + rule + `}`:                                                                   "sluice: body: a field name is not valid UTF-8",
		`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"x` + "\xff" + `"}]}]}`: "sluice: descriptors[0].entries[0].value: not valid UTF-8",
		`{"domain":"golden","descriptors":[{"entries":[{"key":"user","value":"x"}]},{"entries":[{"key":"user","value":"y","value":"z"}]}]}`: "sluice: descriptors[1].entries[0].value: given twice",
		`{"domain":"golden","domain":"other","descriptors":[{"entries":[{"key":"user","value":"x"}]}]}`:                                     "sluice: domain: given twice",
	} {
		code, got := h.post(t, "/v1/allow", body)
		if code != http.StatusBadRequest || !strings.Contains(got, `"error":"`+strings.ReplaceAll(want, `"`, `\"`)) {
			t.Errorf("%q: %d %s\nwant 400 %s", body, code, got, want)
		}
	}
	// A long name given twice is not echoed whole.
	long := strings.Repeat("k", 100_000)
	if code, got := h.post(t, "/v1/allow", `{"`+long+`":1,"`+long+`":2}`); code != http.StatusBadRequest || len(got) > 400 || !strings.Contains(got, "given twice") {
		t.Errorf("long name twice: %d %.300s (%d bytes)", code, got, len(got))
	}
	// Deep nesting (as deep as encoding/json accepts) is scanned without trouble.
	deep := `{"key":"a",` + rule + `,"x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`
	if code, got := h.post(t, "/v1/allow", deep); code != http.StatusBadRequest || !strings.Contains(got, `unknown field \"x\"`) {
		t.Errorf("deep: %d %.300s", code, got)
	}
	if n := h.store.Calls(); n != 0 {
		t.Fatalf("%d store calls for refused requests", n)
	}
	// Valid UTF-8, escaped or not, surrogate pairs included, is accepted as before.
	for _, key := range []string{"é", `\u00e8`, "😀", `\ud83d\ude01`, `a\"b`, `\\`} {
		code, got := h.post(t, "/v1/allow", `{"key":"`+key+`",`+rule+`}`)
		if code != http.StatusOK || !strings.Contains(got, `"allowed":true`) {
			t.Errorf("key %s: %d %s", key, code, got)
		}
	}
	// "é" and "\u00e9" are one key: this one is denied.
	if code, got := h.post(t, "/v1/allow", `{"key":"\u00e9",`+rule+`}`); code != http.StatusOK || !strings.Contains(got, `"allowed":false`) {
		t.Errorf("é escaped: %d %s", code, got)
	}
}

// TestHTTPAllowNever: a cost above the capacity answers retry_after_ms -1 ("never") in both
// forms, per descriptor and overall, and a positive reset_after_ms (issue 30: until the state
// is empty, at most the period; the period when it is empty); a cost that fits later answers
// how long until then. A descriptor over its limit reports 0 remaining, as its RLS status does.
func TestHTTPAllowNever(t *testing.T) {
	h := start(t, goldenRules)
	for _, step := range [][2]string{
		{`{"key":"k","rule":{"limit":2,"period":"1s"},"n":3}`,
			`{"allowed":false,"limit":2,"remaining":2,"retry_after_ms":-1,"reset_after_ms":1000}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"big"}]}],"hits_addend":3}`,
			`{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":-1,"reset_after_ms":1000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":-1,"reset_after_ms":1000}]}`},
		// Two descriptors: the first fits later, the second never; overall never.
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"r"}]}],"hits_addend":2}`,
			`{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000,"descriptors":[{"allowed":true,"code":"OK","limit":2,"remaining":0,"retry_after_ms":0,"reset_after_ms":2000}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"r"}]},{"entries":[{"key":"path","value":"/login"}]}],"hits_addend":2}`,
			`{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":2000,"reset_after_ms":2000},{"allowed":true,"code":"OK","limit":3,"remaining":3,"retry_after_ms":0,"reset_after_ms":0}]}`},
		{`{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"r"}]},{"entries":[{"key":"path","value":"/login"}]}],"hits_addend":4}`,
			`{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":-1,"reset_after_ms":60000,"descriptors":[{"allowed":false,"code":"OVER_LIMIT","limit":2,"remaining":0,"retry_after_ms":-1,"reset_after_ms":1000},{"allowed":false,"code":"OVER_LIMIT","limit":3,"remaining":0,"retry_after_ms":-1,"reset_after_ms":60000}]}`},
	} {
		if _, got := h.post(t, "/v1/allow", step[0]); got != step[1]+"\n" {
			t.Errorf("%s:\n got %s\nwant %s", step[0], got, step[1])
		}
	}
}
