package httplimit

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
)

const (
	ok   = http.StatusOK
	deny = http.StatusTooManyRequests
)

// TestKeyIPSpoofedXFF runs over a real loopback server: without trusted proxies the peer is
// the client whatever X-Forwarded-For says; with the loopback proxy trusted, the entry it
// appended is, and what the client wrote to its left never counts.
func TestKeyIPSpoofedXFF(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		policy := WithLimits(Limit{Name: "ip", Rule: sluice.FixedWindow(2, time.Hour)})
		send := func(url string, xff ...string) int {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			for _, v := range xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			return res.StatusCode
		}

		direct := httptest.NewServer(mustNew(t, l, policy, WithKeyPrefix("direct:"))(okHandler))
		defer direct.Close()
		var got []int
		for i := range 4 {
			got = append(got, send(direct.URL, "198.51.100."+string(rune('1'+i)))) // a new forged client each time
		}
		if want := codes(ok, ok, deny, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("untrusted peer with forged X-Forwarded-For: %v, want %v", got, want)
		}

		res, err := clientip.New([]string{"127.0.0.0/8", "::1"})
		if err != nil {
			t.Fatal(err)
		}
		proxied := httptest.NewServer(mustNew(t, l, policy, WithResolver(res), WithKeyPrefix("proxied:"))(okHandler))
		defer proxied.Close()
		got = nil
		for i := range 4 {
			// The client forges a new leftmost entry each time; the proxy appends 203.0.113.9.
			got = append(got, send(proxied.URL, "10.0.0."+string(rune('1'+i))+", 203.0.113.9"))
		}
		if want := codes(ok, ok, deny, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("trusted proxy, forged entries left of the real client: %v, want %v", got, want)
		}
		// Another real client behind the proxy has its own quota.
		if c := send(proxied.URL, "203.0.113.10"); c != ok {
			t.Errorf("second client behind the proxy: %d", c)
		}
		// A malformed hop stops the walk at the proxy itself, not at anything the client chose.
		got = nil
		for _, v := range []string{"1.1.1.1, garbage", "2.2.2.2, also garbage"} {
			got = append(got, send(proxied.URL, v))
		}
		got = append(got, send(proxied.URL, "3.3.3.3, !"))
		if want := codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("malformed hops: %v, want %v (all counted as the proxy)", got, want)
		}
	})
}

func TestKeyIPv6Grouping(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		rule := sluice.FixedWindow(1, time.Hour)
		h := mustNew(t, l, WithLimits(Limit{Name: "ip", Rule: rule}))(okHandler)
		if got := statuses(h, 1, "/", from("[2001:db8:1:2::1]:1000")); got[0] != ok {
			t.Fatalf("first address of the /64: %v", got)
		}
		if got := statuses(h, 1, "/", from("[2001:db8:1:2:ffff:ffff:ffff:ffff]:1000")); got[0] != deny {
			t.Errorf("another address in the same /64 was not counted with the first: %v", got)
		}
		if got := statuses(h, 1, "/", from("[2001:db8:1:3::1]:1000")); got[0] != ok {
			t.Errorf("the next /64 shares the quota: %v", got)
		}
		// IPv4-mapped addresses count as IPv4.
		_ = statuses(h, 1, "/", from("192.0.2.1:1"))
		if got := statuses(h, 1, "/", from("[::ffff:192.0.2.1]:1")); got[0] != deny {
			t.Errorf("mapped form of a counted IPv4 address: %v", got)
		}

		single := mustNew(t, l, WithLimits(Limit{Name: "ip128", Rule: rule}), WithIPv6Prefix(128))(okHandler)
		_ = statuses(single, 1, "/", from("[2001:db8:9::1]:1"))
		if got := statuses(single, 1, "/", from("[2001:db8:9::2]:1")); got[0] != ok {
			t.Errorf("/128: a neighbour address shares the quota: %v", got)
		}
		wide := mustNew(t, l, WithLimits(Limit{Name: "ip48", Rule: rule}), WithIPv6Prefix(48))(okHandler)
		_ = statuses(wide, 1, "/", from("[2001:db8:7:1::1]:1"))
		if got := statuses(wide, 1, "/", from("[2001:db8:7:2::1]:1")); got[0] != deny {
			t.Errorf("/48: another /64 of the /48 has its own quota: %v", got)
		}
	})
}

func TestKeyHeader(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		h := mustNew(t, l, WithLimits(Limit{Name: "key", Rule: sluice.FixedWindow(2, time.Hour), Key: KeyHeader("x-api-key")}))(okHandler)
		withKey := func(k string) func(*http.Request) {
			return func(r *http.Request) { r.Header.Set("X-Api-Key", k); r.RemoteAddr = "192.0.2.1:1" }
		}
		if got, want := statuses(h, 3, "/", withKey("alice")), codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("alice: %v, want %v", got, want)
		}
		if got := statuses(h, 1, "/", withKey("bob")); got[0] != ok {
			t.Errorf("bob shares alice's quota: %v", got)
		}
		// Parts cannot run into each other, and long keys are hashed.
		if got := statuses(h, 2, "/", withKey("alice|x")); !reflect.DeepEqual(got, codes(ok, ok)) {
			t.Errorf("a key with '|': %v", got)
		}
		long := strings.Repeat("k", 100<<10)
		if got, want := statuses(h, 3, "/", withKey(long)), codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("100 KiB key: %v, want %v", got, want)
		}
		// Without the header the policy does not count the request.
		if got := statuses(h, 5, "/", nil); !reflect.DeepEqual(got, codes(ok, ok, ok, ok, ok)) {
			t.Errorf("no key: %v", got)
		}
	})
}

func TestKeyRouteAndMethod(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		rule := sluice.FixedWindow(2, time.Hour)
		// Inside the mux, r.Pattern is set.
		inner := mustNew(t, l, WithLimits(Limit{Name: "route", Rule: rule, Key: KeyRoute()}))
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", inner(okHandler))
		mux.Handle("GET /users/{id}", inner(okHandler))
		got := append(statuses(mux, 1, "/items/1", nil), statuses(mux, 2, "/items/2", nil)...)
		if want := codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("one pattern, several paths: %v, want %v", got, want)
		}
		if c := statuses(mux, 1, "/users/1", nil); c[0] != ok {
			t.Errorf("another route shares the quota: %v", c)
		}

		// Around the mux, WithServeMux finds the pattern; unknown routes share one key.
		mux2 := http.NewServeMux()
		mux2.Handle("GET /a/{id}", okHandler)
		var buf testenv.LogBuffer
		outer := mustNew(t, l, WithLimits(Limit{Name: "outer", Rule: rule, Key: KeyRoute()}), WithServeMux(mux2), WithLogger(logged(&buf)))(mux2)
		got = append(statuses(outer, 1, "/a/1", nil), statuses(outer, 2, "/a/2", nil)...)
		if want := codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("WithServeMux: %v, want %v", got, want)
		}
		got = append(statuses(outer, 1, "/nope/1", nil), statuses(outer, 2, "/nope/"+strings.Repeat("x", 5000), nil)...)
		if want := codes(http.StatusNotFound, http.StatusNotFound, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("unknown routes: %v, want %v (one shared key)", got, want)
		}
		if recs := buf.Records(t, "httplimit: no route pattern"); len(recs) != 1 || recs[0]["path"] != "/nope/1" {
			t.Errorf("unknown route log (one a second): %v", recs)
		}

		byMethod := mustNew(t, l, WithLimits(Limit{Name: "method", Rule: rule, Key: KeyMethod()}))(okHandler)
		post := func(r *http.Request) { r.Method = http.MethodPost }
		if got, want := statuses(byMethod, 3, "/", post), codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("POST: %v, want %v", got, want)
		}
		if c := statuses(byMethod, 1, "/", nil); c[0] != ok {
			t.Errorf("GET shares POST's quota: %v", c)
		}
	})
}

func TestKeysCompositeAndFunc(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		rule := sluice.FixedWindow(1, time.Hour)
		tenant := KeyFunc(func(r *http.Request) (string, bool) {
			v := r.URL.Query().Get("tenant")
			if v == "panic" {
				panic("tenant lookup failed")
			}
			return v, v != ""
		})
		h := mustNew(t, l, WithLimits(Limit{Name: "tenant-ip", Rule: rule, Key: Keys(tenant, KeyIP())}))(okHandler)
		a, b := from("192.0.2.1:1"), from("192.0.2.2:1")
		got := []int{get(h, "/?tenant=t1", a).Code, get(h, "/?tenant=t1", a).Code, get(h, "/?tenant=t1", b).Code, get(h, "/?tenant=t2", a).Code}
		if want := codes(ok, deny, ok, ok); !reflect.DeepEqual(got, want) {
			t.Errorf("tenant x IP: %v, want %v", got, want)
		}
		// A missing part, or a key function that panics, leaves the request uncounted.
		if got := statuses(h, 3, "/", a); !reflect.DeepEqual(got, codes(ok, ok, ok)) {
			t.Errorf("no tenant: %v", got)
		}
		if got := statuses(h, 3, "/?tenant=panic", a); !reflect.DeepEqual(got, codes(ok, ok, ok)) {
			t.Errorf("panicking key function: %v", got)
		}
	})
}

func TestAppendKeyText(t *testing.T) {
	m, _ := build(nil, []Option{WithIPv6Prefix(64)})
	r := httptest.NewRequest(http.MethodPost, "/x", nil)
	r.RemoteAddr = "[2001:db8::5]:9"
	r.Header.Set("X-Key", "a|b%c")
	r.Pattern = "POST /x"
	key := Keys(KeyRoute(), KeyMethod(), KeyHeader("x-key"), KeyIP())
	got, ok := key.appendKey(nil, r, m)
	if want := "POST /x|POST|a%7Cb%25c|2001:db8::/64"; !ok || string(got) != want {
		t.Errorf("key %q, %v; want %q", got, ok, want)
	}
	if got, _ := (Key{}).appendKey(nil, r, m); string(got) != "2001:db8::/64" {
		t.Errorf("zero Key = %q, want the client IP", got)
	}
}

// TestHostileForwardingHeaders: oversized, malformed and forged X-Forwarded-For and Forwarded
// never panic and never move a request onto another client's key.
func TestHostileForwardingHeaders(t *testing.T) {
	l := backends[0].open(t, sluice.SystemClock{})
	res, err := clientip.New([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	h := mustNew(t, l, WithLimits(Limit{Name: "ip", Rule: sluice.FixedWindow(1, time.Hour)}), WithResolver(res))(okHandler)
	for name, edit := range map[string]func(r *http.Request){
		"1 MiB of garbage": func(r *http.Request) { r.Header.Set("X-Forwarded-For", strings.Repeat("9", 1<<20)) },
		"10k entries":      func(r *http.Request) { r.Header.Set("X-Forwarded-For", strings.Repeat("10.0.0.2,", 10000)+"10.0.0.3") },
		"10k lines":        func(r *http.Request) { r.Header["X-Forwarded-For"] = make([]string, 10000) },
		"forged Forwarded": func(r *http.Request) { r.Header.Set("Forwarded", `for=203.0.113.10;by="`) },
		"quotes":           func(r *http.Request) { r.Header.Set("Forwarded", strings.Repeat(`"`, 1<<16)) },
		"attacker peer claims the victim": func(r *http.Request) {
			r.RemoteAddr = "198.51.100.1:1"
			r.Header.Set("X-Forwarded-For", "203.0.113.9")
		},
	} {
		prepared := func(r *http.Request) {
			r.RemoteAddr = "10.0.0.1:1"
			edit(r)
		}
		if c := get(h, "/", prepared).Code; c != ok && c != deny {
			t.Errorf("%s: status %d", name, c)
		}
	}
	// None of them counted against the clients they named: each still has its one request.
	for _, client := range []string{"203.0.113.9", "203.0.113.10"} {
		if c := get(h, "/", func(r *http.Request) { r.RemoteAddr = "10.0.0.1:1"; r.Header.Set("X-Forwarded-For", client) }).Code; c != ok {
			t.Errorf("a hostile request consumed %s's quota: %d", client, c)
		}
	}
}
