package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/memcached"
)

// setSRVRefresh checks --store-srv-refresh and, when it is positive, makes the memcached
// store of MEMCACHE_SRV follow its DNS SRV record: looked up again at that interval, as
// envoyproxy/ratelimit's MEMCACHE_SRV_REFRESH (the store does it: memcached.WithSRV).
func (f *serveFlags) setSRVRefresh(cfg *server.Config, log *slog.Logger) error {
	every := f.stats.srvRefresh
	if msg, ok := f.envErrs["store-srv-refresh"]; ok { // checkPeer dropped it when the flag is given
		return errors.New(msg)
	}
	if every < 0 {
		return fmt.Errorf("--store-srv-refresh: must not be negative, got %v", every)
	}
	if every == 0 {
		return nil
	}
	name := f.peer.or("MEMCACHE_SRV", "")
	if name == "" || f.store != f.peer.defaults["store"] {
		return errors.New("--store-srv-refresh: needs the memcached store of MEMCACHE_SRV (BACKEND_TYPE=memcache), whose SRV record it looks up again")
	}
	cfg.StoreConfig.MemcachedSRV, cfg.StoreConfig.MemcachedSRVRefresh, cfg.StoreConfig.Logger = name, every, log
	log.Info("the memcached servers follow the SRV record", "srv", name, "every", every)
	return nil
}

// srvAddrs are the servers of an SRV record's answers, as the store that follows it takes
// them (memcached.SRVAddrs).
func srvAddrs(recs []*net.SRV) []string { return memcached.SRVAddrs(recs) }
