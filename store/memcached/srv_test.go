package memcached

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
)

// srvRecord is a DNS SRV record a test changes: the resolver of a srvRefresher.
type srvRecord struct {
	mu     sync.Mutex
	addrs  []string
	err    error
	closed atomic.Bool // set once the store is closed: no look-up may follow
	t      *testing.T
}

func (r *srvRecord) set(err error, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs, r.err = addrs, err
}

func (r *srvRecord) lookup(string) ([]*net.SRV, error) {
	if r.closed.Load() {
		r.t.Errorf("SRV looked up after the store was closed")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	var recs []*net.SRV
	for _, a := range r.addrs {
		host, port, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(port)
		recs = append(recs, &net.SRV{Target: host + ".", Port: uint16(p)})
	}
	return recs, nil
}

// TestSRVRefreshSwapsServers: after the SRV record (MEMCACHE_SRV's) names another server,
// the next look-up moves decisions to it (a key spent on the first server starts afresh on
// the second); a failed or empty look-up keeps the servers in use and is logged once a
// minute.
func TestSRVRefreshSwapsServers(t *testing.T) {
	a := testenv.MemcachedAddr(t)
	b := testenv.StartMemcached(t).Addr()
	var rec srvRecord
	rec.set(nil, a)
	var logs bytes.Buffer
	list := new(memcache.ServerList)
	r := newSRVRefresher(SRV{Name: "_memcache._tcp.test", Lookup: rec.lookup, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, list, nil)
	t0 := time.Unix(1_700_000_000, 0)
	if err := r.refresh(t0); err != nil {
		t.Fatal(err)
	}
	st, err := NewFromServers([]string{a}, WithServerList(list), WithPrefix(fmt.Sprintf("srv%d:", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lim := sluice.New(st)
	limit := sluice.Rule{Algorithm: sluice.AlgorithmFixedWindow, Limit: 1, Period: time.Hour}
	allow := func(what string, want bool) {
		t.Helper()
		d, err := lim.Allow(context.Background(), "k", limit)
		if err != nil || d.Allowed != want {
			t.Fatalf("%s: allowed %v, err %v; want allowed %v", what, d.Allowed, err, want)
		}
	}
	allow("first hit on a", true)
	allow("second hit on a", false)

	rec.set(errors.New("no such host"))
	if err := r.refresh(t0.Add(time.Second)); err == nil {
		t.Fatal("a failed look-up: no error")
	}
	rec.set(nil)
	if err := r.refresh(t0.Add(2 * time.Second)); err == nil {
		t.Fatal("a look-up with no target: no error")
	}
	allow("a failed look-up keeps a", false)
	if n := strings.Count(logs.String(), "SRV look-up failed"); n != 1 {
		t.Errorf("%d failure lines within a minute, want 1:\n%s", n, logs.String())
	}

	rec.set(nil, b)
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.run(ctx, tick); close(done) }()
	tick <- t0.Add(3 * time.Second)
	tick <- t0.Add(4 * time.Second) // taken only once the first tick's refresh is done
	cancel()
	<-done
	allow("first hit on b", true)
	allow("second hit on b", false)
	swaps := strings.Count(logs.String(), "memcached servers from the SRV record")
	rec.set(nil, b)
	if err := r.refresh(t0.Add(5 * time.Second)); err != nil || strings.Count(logs.String(), "memcached servers from the SRV record") != swaps {
		t.Errorf("an unchanged record: err %v, logged a swap:\n%s", err, logs.String())
	}
	rec.set(nil, a)
	if err := r.refresh(t0.Add(6 * time.Second)); err != nil {
		t.Fatal(err)
	}
	allow("back on a, still spent", false)
}

// TestWithSRVFollowsTheRecord: a store built WithSRV looks the record up on its own, every
// interval, moves its decisions to the servers the record names, and stops at Close.
func TestWithSRVFollowsTheRecord(t *testing.T) {
	a := testenv.MemcachedAddr(t)
	b := testenv.StartMemcached(t).Addr()
	rec := srvRecord{t: t}
	rec.set(nil, a)
	var logs testenv.LogBuffer
	st, err := NewFromURL("memcached://"+a, WithPrefix(fmt.Sprintf("srv%d:", time.Now().UnixNano())),
		WithSRV(SRV{Name: "_memcache._tcp.test", Every: 10 * time.Millisecond, Lookup: rec.lookup, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	lim := sluice.New(st)
	limit := sluice.Rule{Algorithm: sluice.AlgorithmFixedWindow, Limit: 1, Period: time.Hour}
	if d, err := lim.Allow(context.Background(), "k", limit); err != nil || !d.Allowed {
		t.Fatalf("first hit on a: %+v %v", d, err)
	}
	rec.set(nil, b)
	testenv.Eventually(t, 10*time.Second, "servers from the record", func() bool {
		return len(logs.Records(t, "memcached servers from the SRV record")) > 0
	})
	if d, err := lim.Allow(context.Background(), "k", limit); err != nil || !d.Allowed {
		t.Errorf("first hit on b: %+v %v, want allowed (a server of its own)", d, err)
	}
	if err := st.Close(); err != nil { // returns once the look-ups have stopped
		t.Fatal(err)
	}
	rec.set(errors.New("looked up after Close")) // a look-up now would fail the test (below)
	rec.closed.Store(true)
}
