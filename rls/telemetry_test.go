package rls

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRedactKey: each request value is hashed unless its level is raw; the hash is the same
// for one value; escaped separators inside a value do not split it.
func TestRedactKey(t *testing.T) {
	entries := []Entry{{Key: "route", Value: "/login"}, {Key: "api_key", Value: `sk|li=ve\x`}}
	key := descriptorKey("edge", entries, nil)
	h := hashValue(`sk\|li\=ve\\x`)
	for _, c := range []struct {
		raw  []bool
		want string
	}{
		{nil, "edge|route=" + hashValue("/login") + "|api_key=" + h},
		{[]bool{true, false}, "edge|route=/login|api_key=" + h},
		{[]bool{true, true}, key},
	} {
		if got := redactKey(key, c.raw); got != c.want {
			t.Errorf("redactKey(%q, %v) = %q, want %q", key, c.raw, got, c.want)
		}
	}
	if hashValue("a") == hashValue("b") || len(h) != len(HashPrefix)+12 { // 48 bits in hex
		t.Errorf("hashes: %q %q %q", hashValue("a"), hashValue("b"), h)
	}
}

// TestRedactKeyNeverShowsAValue: for random values (any bytes, separators included) at
// random levels, no hashed value appears in the redacted key, and raw ones do.
func TestRedactKeyNeverShowsAValue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		entries := make([]Entry, 1+r.IntN(4))
		raw := make([]bool, len(entries))
		for i := range entries {
			v := make([]byte, 8+r.IntN(24))
			for j := range v {
				v[j] = byte(0x20 + r.IntN(0x5f))
			}
			entries[i] = Entry{Key: "k", Value: string(v)}
			raw[i] = r.IntN(3) == 0
		}
		key := descriptorKey("d", entries, nil)
		got := redactKey(key, raw)
		var esc strings.Builder
		for i, e := range entries {
			esc.Reset()
			writeEscaped(&esc, e.Value)
			if shown := strings.Contains(got, esc.String()); shown != raw[i] {
				t.Fatalf("redactKey(%q, %v) = %q: value %d shown %v", key, raw, got, i, shown)
			}
		}
	}
}
