package memcached_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestUnsafeKeysHashed: keys longer than memcached allows, or holding spaces, control
// characters or a leading '#', are hashed into short legal keys; others are sent as they are.
// Either way the state lands under Key(k).
func TestUnsafeKeysHashed(t *testing.T) {
	addr := server(t)
	s := newStore(t, []string{addr})
	raw := memcache.New(addr)
	for _, k := range []string{"plain", "with space", "tab\t", "nl\n", "nul\x00", "del\x7f", "#lead", strings.Repeat("x", 200), strings.Repeat("é", 500), "ä|b"} {
		key := s.Key(k)
		// raw when prefix + key + the longest suffix (34 bytes) fit memcached's 250
		safe := prefixLen+len(k)+34 <= 250 && !strings.ContainsAny(k, " \t\n\x00\x7f#")
		if hashed := strings.Contains(key, "#"); hashed == safe {
			t.Errorf("%q: item key %q, hashed %v", k, key, hashed)
		}
		if len(key)+34 > 250 {
			t.Errorf("%q: item key of %d bytes leaves no room for a suffix", k, len(key))
		}
		if _, err := s.Take(context.Background(), sluice.Request{Key: k, Rule: sluice.GCRA(5, time.Second, 0), N: 1}); err != nil {
			t.Fatalf("%q: %v", k, err)
		}
		if _, err := raw.Get(key + "|s"); err != nil {
			t.Errorf("%q: state item %q: %v", k, key+"|s", err)
		}
	}
}

// TestEveryItemExpires runs the conformance suite under a fresh prefix, then lists the
// server's items (lru_crawler metadump) and wants an expiration on every one of the suite's.
func TestEveryItemExpires(t *testing.T) {
	addr := server(t)
	p := prefix()
	storetest.Run(t, func(t *testing.T, clock sluice.Clock) sluice.Store {
		return newStore(t, []string{addr}, memcached.WithClock(clock), memcached.WithPrefix(p))
	})
	items := expirations(t, addr, p)
	if len(items) == 0 {
		t.Fatal("no item of the suite found in the metadump")
	}
	for key, exp := range items {
		if exp == -1 {
			t.Errorf("item without expiration: %s", key)
		}
	}
	t.Logf("%d items, all with an expiration", len(items))
}

// TestDebtTTL (issue 31, item 6): the largest settle on a key of an hourly rule leaves its
// items an expiration no later than its debt takes to pay plus its capacity to refill
// (storetest.DebtBounds: at most 3 hours here), plus the store's rounding to whole seconds; a
// settle once kept a request rule's key for 367 days.
func TestDebtTTL(t *testing.T) {
	addr := server(t)
	p := prefix()
	s := newStore(t, []string{addr}, memcached.WithPrefix(p))
	ctx := context.Background()
	bound := map[string]time.Duration{}
	for _, a := range sluice.Algorithms() {
		r := storetest.DebtRule(a, time.Hour)
		_, full := storetest.DebtBounds(r)
		d, err := s.Take(ctx, sluice.Request{Key: "debt:" + a.String(), Rule: r, N: sluice.MaxLimit, Settle: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: settle %d: %+v", r, int64(sluice.MaxLimit), d)
		bound[s.Key("debt:"+a.String())] = full
	}
	now := time.Now()
	items := expirations(t, addr, p)
	for key, exp := range items {
		base := key[:strings.LastIndexByte(key, '|')]
		full, ok := bound[base]
		if !ok {
			t.Fatalf("item %s: not a key of the test", key)
		}
		if ttl := time.Unix(exp, 0).Sub(now); exp == -1 || ttl > full+3*time.Second {
			t.Errorf("item %s expires in %v, want at most %v", key, ttl, full)
		}
	}
	if len(items) < len(bound) {
		t.Fatalf("%d items in the metadump, want one at least per algorithm", len(items))
	}
}

// expirations lists the server's items under prefix (lru_crawler metadump), each with its
// expiration: Unix seconds, or -1 for none.
func expirations(t *testing.T, addr, prefix string) map[string]int64 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "lru_crawler metadump all\r\n")
	sc := bufio.NewScanner(c)
	items := map[string]int64{}
	for sc.Scan() {
		line := sc.Text()
		if line == "END" {
			break
		}
		if strings.HasPrefix(line, "BUSY") || strings.HasPrefix(line, "ERROR") {
			t.Skipf("metadump unavailable: %s", line)
		}
		f := strings.Fields(line) // key=<urlencoded> exp=<unix or -1> ...
		if len(f) < 2 || !strings.HasPrefix(f[0], "key=") || !strings.HasPrefix(f[1], "exp=") {
			continue
		}
		key, err := url.QueryUnescape(strings.TrimPrefix(f[0], "key="))
		if err != nil || !strings.HasPrefix(key, prefix) {
			continue
		}
		exp, err := strconv.ParseInt(strings.TrimPrefix(f[1], "exp="), 10, 64)
		if err != nil {
			t.Fatalf("metadump line %q: %v", line, err)
		}
		items[key] = exp
	}
	return items
}

// TestLongExpiration: items that must live more than 30 days get an absolute expiration
// (memcached reads a relative one that long as a time in 1970, and drops the item at once).
func TestLongExpiration(t *testing.T) {
	addr := server(t)
	s := newStore(t, []string{addr})
	raw := memcache.New(addr)
	ctx := context.Background()
	for _, r := range []sluice.Rule{sluice.FixedWindow(5, 366*24*time.Hour), sluice.GCRA(5, 200*24*time.Hour, 0)} {
		if _, err := s.Take(ctx, sluice.Request{Key: "long", Rule: r, N: 1}); err != nil {
			t.Fatal(err)
		}
		d, err := s.Take(ctx, sluice.Request{Key: "long", Rule: r, N: 0})
		if err != nil || d.Remaining != 4 {
			t.Errorf("%s: peek after one take: %+v, %v; want 4 remaining (the item must still be there)", r, d, err)
		}
	}
	if _, err := raw.Get(s.Key("long") + "|s"); err != nil {
		t.Errorf("state item: %v", err)
	}
}
