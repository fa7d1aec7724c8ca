package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed/regions"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redis"
)

// regionsFlags are the shared flags of the regions that share global limits (scope: global
// in the rules; package distributed/regions).
type regionsFlags struct {
	region, list, mode, coordinator string
	interval, epoch, skew           time.Duration
}

func (f *regionsFlags) register(fs *flag.FlagSet, env envFunc) {
	fs.StringVar(&f.region, "region", env("region", "SLUICE_REGION", ""), "this instance's region, one of --regions: limits of scope global are shared between the regions [SLUICE_REGION]")
	fs.StringVar(&f.list, "regions", env("regions", "SLUICE_REGIONS", ""), "every region and its Redis, this one's included: name=redis://host:port,name=rediss://... (each region decides on its own; empty: one region, the store's) [SLUICE_REGIONS]")
	fs.StringVar(&f.mode, "regions-mode", env("regions-mode", "SLUICE_REGIONS_MODE", "escrow"), "how the regions share a global limit: escrow (each a share, never over) or async (counts exchanged, a bounded overshoot) [SLUICE_REGIONS_MODE]")
	fs.StringVar(&f.coordinator, "regions-coordinator", env("regions-coordinator", "SLUICE_REGIONS_COORDINATOR", ""), "escrow: the region whose Redis holds the shares every region reads (default: the first of --regions) [SLUICE_REGIONS_COORDINATOR]")
	f.interval = envDuration(env, "regions-interval", "SLUICE_REGIONS_INTERVAL", regions.DefaultInterval)
	fs.DurationVar(&f.interval, "regions-interval", f.interval, "how often an instance exchanges with the other regions (demands and shares, or counts) [SLUICE_REGIONS_INTERVAL]")
	f.epoch = envDuration(env, "regions-epoch", "SLUICE_REGIONS_EPOCH", regions.DefaultEpoch)
	fs.DurationVar(&f.epoch, "regions-epoch", f.epoch, "escrow: how long a region's share lasts; a region cut off from the coordinator drains within two [SLUICE_REGIONS_EPOCH]")
	f.skew = envDuration(env, "regions-max-clock-skew", "SLUICE_REGIONS_MAX_CLOCK_SKEW", regions.DefaultMaxClockSkew)
	fs.DurationVar(&f.skew, "regions-max-clock-skew", f.skew, "escrow: how far the regions' clocks may disagree [SLUICE_REGIONS_MAX_CLOCK_SKEW]")
}

// envDuration is the duration of env for a flag (def when unset or unparsable: the flag
// package reports a bad flag value itself).
func envDuration(env envFunc, flagName, name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(env(flagName, name, def.String())); err == nil {
		return d
	}
	return def
}

// regionURL is one entry of --regions.
type regionURL struct{ name, url string }

// parse returns the regions of --regions, or the first problem, naming the flag.
func (f *regionsFlags) parse() ([]regionURL, error) {
	if f.list == "" {
		if f.region != "" {
			return nil, fmt.Errorf("--region %q: set --regions too (every region and its Redis)", f.region)
		}
		return nil, nil
	}
	var out []regionURL
	for _, item := range strings.Split(f.list, ",") {
		name, url, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("--regions: want name=redis://host:port, got %q", store.Redact(item))
		}
		if s, err := store.Scheme(url); err != nil || !strings.HasPrefix(s, "redis") {
			return nil, fmt.Errorf("--regions: region %q: want a redis URL (redis://, rediss://, redis-cluster://, redis-sentinel://), got %q", name, store.Redact(url))
		}
		out = append(out, regionURL{name, url})
	}
	if f.region == "" {
		return nil, fmt.Errorf("--region: which of --regions is this instance's? (one of %s)", names(out))
	}
	if _, err := regions.ParseMode(f.mode); err != nil {
		return nil, fmt.Errorf("--regions-mode: %w", err)
	}
	found, coord := false, f.coordinator == ""
	for _, r := range out {
		found = found || r.name == f.region
		coord = coord || r.name == f.coordinator
	}
	switch {
	case !found:
		return nil, fmt.Errorf("--region: %q is not one of --regions (%s)", f.region, names(out))
	case !coord:
		return nil, fmt.Errorf("--regions-coordinator: %q is not one of --regions (%s)", f.coordinator, names(out))
	}
	return out, nil
}

func names(rs []regionURL) string {
	n := make([]string, len(rs))
	for i, r := range rs {
		n[i] = r.name
	}
	return strings.Join(n, ", ")
}

// open builds the regions' store of the flags, its keys under prefix, reached with the
// store's TLS settings, or nil when no regions are configured; close releases it and the
// regions' clients.
func (f *regionsFlags) open(prefix string, t store.ClientTLS, log *slog.Logger) (st sluice.Store, closeFn func(), err error) {
	list, err := f.parse()
	if err != nil || list == nil {
		return nil, func() {}, err
	}
	tc, err := t.ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	var closers []io.Closer
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i].Close()
		}
	}
	mode, _ := regions.ParseMode(f.mode)
	var syncLog logthrottle.Throttle // at most a line a second
	cfg := regions.Config{Region: f.region, Mode: mode, Interval: f.interval, Epoch: f.epoch, MaxClockSkew: f.skew,
		OnSyncError: func(err error) {
			syncLog.Log(context.Background(), log, time.Now(), slog.LevelWarn, "regions: sync failed: global limits are decided on the shares and counts last read", slog.Any("err", err))
		}}
	coordinator := f.coordinator
	if coordinator == "" {
		coordinator = list[0].name
	}
	for _, r := range list {
		opts := []redis.Option{redis.WithTLS(tc)}
		if prefix != "" {
			opts = append(opts, redis.WithPrefix(prefix))
		}
		if r.name != f.region {
			// Another region's Redis is a round trip of up to hundreds of milliseconds away:
			// the store's default bound (250 ms) would fail every read of a far region.
			opts = append(opts, redis.WithTimeout(max(time.Second, f.epoch)))
		}
		rs, err := redis.NewFromURL(r.url, opts...)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--regions: region %q: %w", r.name, err)
		}
		closers = append(closers, rs)
		cfg.Regions = append(cfg.Regions, regions.Region{Name: r.name, Store: rs})
		if r.name == coordinator && mode == regions.Escrow {
			cfg.Coordinator = regions.NewRedisCoordinator(rs.Client(), "")
		}
	}
	s, err := regions.New(cfg)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	log.Info("regions: limits of scope global are shared between regions", "region", f.region, "regions", names(list),
		"mode", mode.String(), "coordinator", coordinator, "interval", f.interval, "epoch", f.epoch)
	return s, func() { _ = s.Close(); closeAll() }, nil
}
