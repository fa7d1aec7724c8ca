package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/simulate"
)

// Defaults of Config's zero values.
const (
	// DefaultMaxClients bounds the client summaries kept per rule: about 250 bytes each.
	DefaultMaxClients = 100_000
	// DefaultTop is the number of top denied clients reported per rule.
	DefaultTop = 10
	// DefaultPoints is the number of buckets of the series over time, at most twice it.
	DefaultPoints = 200
)

// Config is one replay of a log. The zero value of every field but Rules and Format is a
// documented default.
type Config struct {
	// Rules decide the requests: each domain with a proxy section (proxy.Domains) builds a
	// request's descriptors by its actions, as sluice proxy does. Required.
	Rules *config.Config
	// Format reads the log (ParseFormat). Required.
	Format *Format
	// TrustedProxies are the proxies whose X-Forwarded-For and Forwarded are believed, as
	// sluice proxy's (clientip.New): the client of a line is its peer, past them.
	TrustedProxies []string
	// Store, when set, builds the store the instances share, on the replay's virtual clock,
	// with the Closer that releases it; each call must return a store with fresh state (a
	// Redis under a new key prefix, with the clock as client time). Default: a memory store.
	Store func(clock sluice.Clock) (sluice.Store, io.Closer, error)
	// Mode is how the instances decide (a distributed mode of simulate.ParseModes: sync,
	// overlimit, async_INTERVAL, with its instances and routing). Default: sync, one
	// instance.
	Mode simulate.Mode
	// Seed seeds the skewed routing.
	Seed uint64
	// MaxClients bounds the client summaries kept per rule (default DefaultMaxClients).
	MaxClients int
	// Top is the number of top denied clients reported per rule (default DefaultTop).
	Top int
	// Points bounds the buckets of each rule's series over time (default DefaultPoints).
	Points int
	// Strict makes a malformed line an error; by default it is counted and skipped.
	Strict bool
	// Progress, when set, is called now and then with the bytes read and the lines.
	Progress Progress
}

// withDefaults checks cfg and fills its defaults.
func (cfg Config) withDefaults() (Config, *clientip.Resolver, error) {
	var errs []error
	if cfg.Rules == nil {
		errs = append(errs, errors.New("replay: rules: not set"))
	}
	if cfg.Format == nil {
		errs = append(errs, errors.New("replay: format: not set"))
	}
	resolver, err := clientip.New(cfg.TrustedProxies)
	if err != nil {
		errs = append(errs, fmt.Errorf("replay: %w", err))
	}
	if cfg.Mode.Build == nil {
		if cfg.Mode.Name != "" && cfg.Mode.Name != "single" {
			errs = append(errs, fmt.Errorf("replay: mode: %s has no instances to decide on", cfg.Mode.Name))
		}
		cfg.Mode = simulate.Sync(1, simulate.RoundRobin)
	}
	if cfg.Mode.Nodes < 1 {
		errs = append(errs, fmt.Errorf("replay: nodes: must be at least 1, got %d", cfg.Mode.Nodes))
	}
	if cfg.MaxClients < 0 || cfg.Top < 0 || cfg.Points < 0 {
		errs = append(errs, fmt.Errorf("replay: max clients, top and points must not be negative (%d, %d, %d)", cfg.MaxClients, cfg.Top, cfg.Points))
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.Top == 0 {
		cfg.Top = DefaultTop
	}
	if cfg.Points == 0 {
		cfg.Points = DefaultPoints
	}
	return cfg, resolver, errors.Join(errs...)
}

// Run replays the log in through cfg's rules and reports what they would have done.
func Run(ctx context.Context, cfg Config, in Input) (*Report, error) {
	reps, err := runAll(ctx, cfg, in, []*config.Config{cfg.Rules}, nil)
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// observer watches a replay through several sets of rules: group names the request's group
// (Compare's client), and each receives every request's group, outcome under each set, and
// whether a limit of a set shows the group raw.
type observer interface {
	group(q *request) string
	each(group string, denied []bool, raw bool)
}

// runAll replays the log through each set of rules side by side, each on its own store
// and clock, and tells obs (when set) every request's outcome under each set.
func runAll(ctx context.Context, cfg Config, in Input, rules []*config.Config, obs observer) ([]*Report, error) {
	cfg, resolver, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if r == nil {
			return nil, errors.New("replay: rules: not set")
		}
	}
	reader := newLogReader(cfg.Format, cfg.Strict, cfg.Progress)
	reps := make([]*replayer, len(rules))
	defer func() {
		for _, r := range reps {
			if r != nil {
				_ = r.close()
			}
		}
	}()
	var q request
	var last, first int64
	var outOfOrder, records int64
	var maxLag time.Duration
	denied := make([]bool, len(rules))
	err = reader.read(ctx, in, func(rec *Record) error {
		at := rec.At
		if reps[0] == nil {
			first, last = at, at
			for i, rs := range rules {
				if reps[i], err = newReplayer(&cfg, rs, at); err != nil {
					return err
				}
			}
		}
		if at < last { // decided at the latest instant seen: time never goes back
			outOfOrder++
			maxLag = max(maxLag, time.Duration(last-at))
			at = last
		}
		last = at
		records++
		cost := max(rec.Cost, 1)
		q.reset(rec, resolver)
		group := ""
		if obs != nil {
			group = obs.group(&q)
		}
		raw := false
		for i, r := range reps {
			r.rawOf, r.raw = group, false
			d, err := r.decide(ctx, &q, at, cost)
			if err != nil {
				return fmt.Errorf("line %d: %w", rec.Line, err)
			}
			denied[i], raw = d, raw || r.raw
		}
		if obs != nil {
			obs.each(group, denied, raw)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Report, len(rules))
	for i := range rules {
		rep := &Report{Log: in.Name, Format: cfg.Format.Name(), Mode: cfg.Mode.Name, Nodes: cfg.Mode.Nodes,
			Lines: reader.lines, Requests: records, Malformed: reader.malformed,
			OutOfOrder: outOfOrder, MaxLag: maxLag}
		if reps[i] != nil {
			rep.Start, rep.End = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
			rep.Denied, rep.Invalid = reps[i].denied, reps[i].invalid
			for _, s := range reps[i].order {
				rep.Rules = append(rep.Rules, s.report())
			}
		}
		out[i] = rep
	}
	return out, nil
}
