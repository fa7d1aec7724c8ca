package memcached

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice/internal/logthrottle"
)

// SRV is a DNS SRV record a store follows (WithSRV).
type SRV struct {
	// Name is the record, e.g. "_memcache._tcp.cache.local".
	Name string
	// Every is the time between two look-ups; 0 does not look up.
	Every time.Duration
	// Lookup resolves the record (default: net.LookupSRV("", "", name)).
	Lookup func(name string) ([]*net.SRV, error)
	// Logger receives a line for each change of servers and, at most once a minute, for a
	// failed look-up (default: discard).
	Logger *slog.Logger
}

// WithSRV makes the store NewFromServers (and NewFromURL) builds follow a DNS SRV record: its
// name is looked up again every s.Every and, when its targets changed, they become the
// store's servers for every decision after it, as envoyproxy/ratelimit refreshes MEMCACHE_SRV
// every MEMCACHE_SRV_REFRESH. A failed look-up, or one with no target, keeps the servers in
// use. Items on a server that leaves are not moved: their keys start afresh on the server they
// map to now. The look-ups run until Close. New, given its client, ignores it.
func WithSRV(s SRV) Option { return optionFunc(func(c *config) { c.srv = s }) }

// SRVAddrs are the host:port targets of an SRV record's answers, sorted: the resolver
// shuffles answers by weight, and the order of the servers picks each key's server, so an
// unchanged record must give the same list.
func SRVAddrs(recs []*net.SRV) []string {
	addrs := make([]string, 0, len(recs))
	for _, r := range recs {
		addrs = append(addrs, net.JoinHostPort(strings.TrimSuffix(r.Target, "."), strconv.Itoa(int(r.Port))))
	}
	slices.Sort(addrs)
	return addrs
}

// srvRefresher looks an SRV record up again and swaps the servers of a list for its
// targets. A failed look-up, or one with no target, keeps the servers in use (logged, at most
// one line a minute).
type srvRefresher struct {
	name     string
	lookup   func(name string) ([]*net.SRV, error)
	list     *memcache.ServerList
	log      *slog.Logger
	throttle logthrottle.Throttle
	last     []string // the servers set last
}

func newSRVRefresher(s SRV, list *memcache.ServerList, servers []string) *srvRefresher {
	r := &srvRefresher{name: s.Name, lookup: s.Lookup, list: list, log: s.Logger, last: servers,
		throttle: logthrottle.Throttle{Interval: time.Minute}}
	if r.lookup == nil {
		r.lookup = func(name string) ([]*net.SRV, error) {
			_, addrs, err := net.LookupSRV("", "", name)
			return addrs, err
		}
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return r
}

// refresh looks the record up once and, when it names other servers, makes them the list's.
func (r *srvRefresher) refresh(now time.Time) error {
	recs, err := r.lookup(r.name)
	if err == nil && len(recs) == 0 {
		err = errors.New("no target")
	}
	if err == nil {
		addrs := SRVAddrs(recs)
		if slices.Equal(addrs, r.last) {
			return nil
		}
		if err = r.list.SetServers(addrs...); err == nil {
			r.log.Info("memcached servers from the SRV record", "srv", r.name, "servers", strings.Join(addrs, ","))
			r.last = addrs
			return nil
		}
	}
	err = fmt.Errorf("memcached: SRV %q: %w", r.name, err)
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

// followSRV starts the look-ups of cfg.srv over list, whose servers are servers now; the
// returned func stops them.
func followSRV(cfg config, list *memcache.ServerList, servers []string) func() {
	if cfg.srv.Every <= 0 {
		return func() {}
	}
	r := newSRVRefresher(cfg.srv, list, servers)
	ctx, cancel := context.WithCancel(context.Background())
	t := time.NewTicker(cfg.srv.Every)
	done := make(chan struct{})
	go func() { r.run(ctx, t.C); close(done) }()
	return func() { t.Stop(); cancel(); <-done }
}
