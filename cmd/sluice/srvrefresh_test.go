package main

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
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// srvRecord is a DNS SRV record a test changes: the resolver of a srvRefresher.
type srvRecord struct {
	mu    sync.Mutex
	addrs []string
	err   error
}

func (r *srvRecord) set(err error, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs, r.err = addrs, err
}

func (r *srvRecord) lookup(string) ([]*net.SRV, error) {
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

// TestSRVRefreshSwapsServers: after MEMCACHE_SRV's record names another server, the next
// look-up moves decisions to it (a key spent on the first server starts afresh on the
// second); a failed or empty look-up keeps the servers in use and is logged once a minute.
func TestSRVRefreshSwapsServers(t *testing.T) {
	a := testenv.MemcachedAddr(t)
	b := testenv.StartMemcached(t).Addr()
	var rec srvRecord
	rec.set(nil, a)
	var logs bytes.Buffer
	r := newSRVRefresher("_memcache._tcp.test", rec.lookup, slog.New(slog.NewTextHandler(&logs, nil)))
	t0 := time.Unix(1_700_000_000, 0)
	if err := r.refresh(t0); err != nil {
		t.Fatal(err)
	}
	st, closer, err := store.Open(context.Background(), store.Config{URL: "memcached://" + a, MemcachedServers: r.list,
		Prefix: fmt.Sprintf("srv%d:", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
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

// TestSRVRefreshFlagChecked: --store-srv-refresh without MEMCACHE_SRV's store, or negative,
// stops serve with an error naming the flag.
func TestSRVRefreshFlagChecked(t *testing.T) {
	for _, refresh := range []string{"30s", "-1s"} {
		code, _, errOut := runCLI("serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store-srv-refresh", refresh)
		if code != 2 || !strings.Contains(errOut, "--store-srv-refresh") {
			t.Errorf("--store-srv-refresh %s: exit %d, stderr %q; want 2 naming the flag", refresh, code, errOut)
		}
	}
}
