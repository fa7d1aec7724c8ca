package server_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// reserveID posts a reserve and returns its answer with the id (if any) replaced by ID, and
// the id.
func reserveID(t *testing.T, h *harness, body string) (int, string, string) {
	t.Helper()
	code, got := h.post(t, "/v1/reserve", body)
	var out struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(got), &out)
	if out.ID != "" && !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(out.ID) {
		t.Fatalf("id %q", out.ID)
	}
	if out.ID != "" {
		got = strings.Replace(got, out.ID, "ID", 1)
	}
	return code, got, out.ID
}

// TestHTTPBudget pins the budget API: a strict reservation admitted and then refused for want
// of room, a bounded one admitted while the budget is not spent, their commits (an
// over-estimate given back, an excess charged), a cancel, a named limit of two rules (both
// reserved; the one that refuses named), an expired reservation that cannot be committed.
func TestHTTPBudget(t *testing.T) {
	h := start(t, goldenRules)
	rule := `"rule":{"algorithm":"fixed_window","limit":100,"period":"1m"}`
	code, got, a := reserveID(t, h, `{"key":"tenant",`+rule+`,"estimate":60,"mode":"strict"}`)
	if want := `{"id":"ID","allowed":true,"limit":100,"remaining":100,"retry_after_ms":0,"reset_after_ms":60000}` + "\n"; code != 200 || got != want { // remaining: what was left when it came
		t.Fatalf("reserve 60: %d %s", code, got)
	}
	code, got, _ = reserveID(t, h, `{"key":"tenant",`+rule+`,"estimate":50,"mode":"strict"}`)
	if want := `{"allowed":false,"limit":100,"remaining":40,"retry_after_ms":60000,"reset_after_ms":60000,"denied_rule":0}` + "\n"; code != 200 || got != want {
		t.Fatalf("strict reserve of 50 with 40 left: %d %s", code, got)
	}
	_, _, b := reserveID(t, h, `{"key":"tenant",`+rule+`,"estimate":50}`) // bounded: 40 left, not spent
	if b == "" {
		t.Fatal("bounded reserve of 50 with 40 left: refused")
	}
	steps := [][3]string{
		{"/v1/commit", `{"key":"tenant",` + rule + `,"id":"` + a + `","actual":10}`, `{"allowed":true,"limit":100,"remaining":40,"retry_after_ms":0,"reset_after_ms":60000}`},
		{"/v1/commit", `{"key":"tenant",` + rule + `,"id":"` + b + `","actual":70}`, `{"allowed":true,"limit":100,"remaining":20,"retry_after_ms":0,"reset_after_ms":60000}`},
		{"/v1/commit", `{"key":"tenant",` + rule + `,"id":"` + b + `","actual":70}`, `{"error":"sluice: no such reservation: id: not open (unknown, committed, cancelled or expired)","code":"InvalidArgument"}`},
	}
	for _, st := range steps {
		if code, got := h.post(t, st[0], st[1]); got != st[2]+"\n" {
			t.Errorf("%s %s:\n got %d %s\nwant %s", st[0], st[1], code, got, st[2])
		}
	}
	// a named limit of two rules: both hold the estimate; cancelled, both give it back
	code, got, c := reserveID(t, h, `{"key":"u","rule":"golden.tiered","estimate":2,"mode":"strict"}`)
	if want := `{"id":"ID","allowed":true,"limit":2,"remaining":2,"retry_after_ms":0,"reset_after_ms":60000}` + "\n"; code != 200 || got != want {
		t.Fatalf("reserve on golden.tiered: %d %s", code, got)
	}
	code, got, _ = reserveID(t, h, `{"key":"u","rule":"golden.tiered","estimate":2,"mode":"strict"}`)
	if want := `{"allowed":false,"limit":2,"remaining":0,"retry_after_ms":1000,"reset_after_ms":1000,"denied_rule":0}` + "\n"; got != want {
		t.Fatalf("second reserve on golden.tiered: %d %s", code, got)
	}
	if code, got := h.post(t, "/v1/cancel", `{"key":"u","rule":"golden.tiered","id":"`+c+`"}`); code != 200 || got != `{"allowed":true,"limit":2,"remaining":2,"retry_after_ms":0,"reset_after_ms":0}`+"\n" {
		t.Fatalf("cancel: %d %s", code, got)
	}
	// a reservation left to expire (its TTL 10 s) costs what it held and cannot be committed
	_, _, e := reserveID(t, h, `{"key":"e",`+rule+`,"estimate":30,"ttl":"10s"}`)
	h.clock.Advance(10 * time.Second)
	if code, _ := h.post(t, "/v1/commit", `{"key":"e",`+rule+`,"id":"`+e+`","actual":1}`); code != http.StatusBadRequest {
		t.Fatalf("commit after the TTL: %d", code)
	}
	if _, got, _ := reserveID(t, h, `{"key":"e",`+rule+`,"estimate":0,"mode":"strict"}`); !strings.Contains(got, `"remaining":70`) {
		t.Fatalf("after the expiry: %s, want 70 remaining", got)
	}
}

// TestHTTPBudgetBadInput: the budget API refuses bad input with a 400 naming the field,
// touching no state.
func TestHTTPBudgetBadInput(t *testing.T) {
	h := start(t, goldenRules)
	rule := `"rule":{"limit":10,"period":"1m"}`
	id := `"id":"0123456789abcdef0123456789abcdef"`
	for _, c := range []struct{ path, body, field string }{
		{"/v1/reserve", `{`, "body"},
		{"/v1/reserve", `{"key":"k",` + rule + `}`, "estimate"},
		{"/v1/reserve", `{"key":"k",` + rule + `,"estimate":-1}`, "estimate"},
		{"/v1/reserve", `{"key":"k",` + rule + `,"estimate":1000000001}`, "estimate"},
		{"/v1/reserve", `{"key":"k",` + rule + `,"estimate":1,"mode":"lax"}`, "mode"},
		{"/v1/reserve", `{"key":"k",` + rule + `,"estimate":1,"ttl":"soon"}`, "ttl"},
		{"/v1/reserve", `{"key":"k",` + rule + `,"estimate":1,"on_expiry":"later"}`, "on_expiry"},
		{"/v1/reserve", `{"key":"k",` + rule + `,"estimate":1,"n":1}`, "body"},
		{"/v1/reserve", `{"key":"k","rule":{"limit":0,"period":"1m"},"estimate":1}`, "rule.limit"},
		{"/v1/reserve", `{"key":"k",` + rule + `,"estimate":1,"estimate":2}`, "estimate"},
		{"/v1/commit", `{"key":"k",` + rule + `,` + id + `}`, "actual"},
		{"/v1/commit", `{"key":"k",` + rule + `,` + id + `,"actual":-5}`, "actual"},
		{"/v1/commit", `{"key":"k",` + rule + `,"id":"xyz","actual":1}`, "id"},
		{"/v1/commit", `{"key":"k",` + rule + `,"actual":1}`, "id"},
		{"/v1/cancel", `{"key":"k",` + rule + `,` + id + `,"actual":1}`, "actual"},
		{"/v1/commit", `{"key":"",` + rule + `,` + id + `,"actual":1}`, "key"},
	} {
		code, msg := h.post(t, c.path, c.body)
		if code != http.StatusBadRequest || !strings.Contains(msg, c.field+":") && !strings.Contains(msg, c.field+" ") {
			t.Errorf("%s %s: %d %s, want 400 naming %s", c.path, c.body, code, msg, c.field)
		}
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls for refused requests", n)
	}
	// the ttl longer than the period is the store's to refuse: nothing held
	if code, msg := h.post(t, "/v1/reserve", `{"key":"k",`+rule+`,"estimate":1,"ttl":"2m"}`); code != http.StatusBadRequest || !strings.Contains(msg, "ttl:") {
		t.Errorf("ttl of 2m on a 1m rule: %d %s", code, msg)
	}
	// a commit of an unknown reservation moves nothing
	if code, msg := h.post(t, "/v1/commit", `{"key":"k",`+rule+`,`+id+`,"actual":5}`); code != http.StatusBadRequest || !strings.Contains(msg, "id: not open") {
		t.Errorf("commit unknown: %d %s", code, msg)
	}
	if _, got, _ := reserveID(t, h, `{"key":"k",`+rule+`,"estimate":0,"mode":"strict"}`); !strings.Contains(got, `"remaining":10`) {
		t.Errorf("after bad input: %s, want all 10 remaining", got)
	}
}
