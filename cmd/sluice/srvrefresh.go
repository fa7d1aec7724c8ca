package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/server"
)

// srvAddrs are the host:port targets of an SRV record's answers, sorted: the resolver
// shuffles answers by weight, and the order of the servers picks each key's server, so an
// unchanged record must give the same list.
func srvAddrs(recs []*net.SRV) []string {
	addrs := make([]string, 0, len(recs))
	for _, r := range recs {
		addrs = append(addrs, net.JoinHostPort(strings.TrimSuffix(r.Target, "."), strconv.Itoa(int(r.Port))))
	}
	slices.Sort(addrs)
	return addrs
}

// srvRefresher looks MEMCACHE_SRV's DNS SRV record up again and swaps the memcached store's
// servers for its targets, as envoyproxy/ratelimit does every MEMCACHE_SRV_REFRESH. A failed
// look-up, or one with no target, keeps the servers in use (logged, at most one line a
// minute).
type srvRefresher struct {
	name     string
	lookup   func(name string) ([]*net.SRV, error)
	list     *memcache.ServerList
	log      *slog.Logger
	throttle logthrottle.Throttle
	last     []string // the servers set last
}

func newSRVRefresher(name string, lookup func(string) ([]*net.SRV, error), log *slog.Logger) *srvRefresher {
	return &srvRefresher{name: name, lookup: lookup, list: new(memcache.ServerList), log: log,
		throttle: logthrottle.Throttle{Interval: time.Minute}}
}

// refresh looks the record up once and, when it names servers, makes them the store's.
func (r *srvRefresher) refresh(now time.Time) error {
	recs, err := r.lookup(r.name)
	if err == nil && len(recs) == 0 {
		err = errors.New("no target")
	}
	if err == nil {
		addrs := srvAddrs(recs)
		if slices.Equal(addrs, r.last) {
			return nil
		}
		if err = r.list.SetServers(addrs...); err == nil {
			r.log.Info("memcached servers from the SRV record", "srv", r.name, "servers", strings.Join(addrs, ","))
			r.last = addrs
			return nil
		}
	}
	err = fmt.Errorf("MEMCACHE_SRV %q: %w", r.name, err)
	r.throttle.Log(context.Background(), r.log, now, slog.LevelWarn, "SRV look-up failed: the memcached servers in use stay",
		slog.String("error", err.Error()))
	return err
}

// run refreshes at every tick until ctx ends.
func (r *srvRefresher) run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick:
			_ = r.refresh(now)
		}
	}
}

// startSRVRefresh starts the look-ups of --store-srv-refresh when it is positive: the store of
// cfg then holds its servers in a list the look-ups swap. The returned func stops them.
func (f *serveFlags) startSRVRefresh(cfg *server.Config, log *slog.Logger) (func(), error) {
	every := f.stats.srvRefresh
	if msg, ok := f.envErrs["store-srv-refresh"]; ok { // checkPeer dropped it when the flag is given
		return nil, errors.New(msg)
	}
	if every < 0 {
		return nil, fmt.Errorf("--store-srv-refresh: must not be negative, got %v", every)
	}
	if every == 0 {
		return func() {}, nil
	}
	name := f.peer.or("MEMCACHE_SRV", "")
	if name == "" || f.store != f.peer.defaults["store"] {
		return nil, errors.New("--store-srv-refresh: needs the memcached store of MEMCACHE_SRV (BACKEND_TYPE=memcache), whose SRV record it looks up again")
	}
	r := newSRVRefresher(name, f.peer.srv, log)
	r.last = strings.Split(strings.TrimPrefix(f.store, "memcached://"), ",") // looked up at start (peerMemcache)
	cfg.StoreConfig.MemcachedServers = r.list
	ctx, cancel := context.WithCancel(context.Background())
	t := time.NewTicker(every)
	go r.run(ctx, t.C)
	log.Info("the memcached servers follow the SRV record", "srv", name, "every", every)
	return func() { t.Stop(); cancel() }, nil
}
