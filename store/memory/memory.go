// Package memory is Sluice's embedded store: per-key algorithm state in a sharded map inside
// the process. It is the default store of the service and the reference the other stores are
// held to. Decisions on existing keys allocate nothing.
//
// Idle keys expire when their state is back to full capacity (nothing is lost by forgetting
// them); a background sweep removes them, and a maximum key count bounds memory under a flood
// of unique keys by evicting the entries closest to full.
package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Defaults for the options.
const (
	DefaultMaxKeys       = 1 << 20
	DefaultShards        = 64
	DefaultSweepInterval = time.Minute
	evictionSamples      = 8
)

// Store is the in-process store. It is safe for concurrent use. Build it with New; call Close
// to stop the background sweep.
type Store struct {
	shards    []shard
	mask      uint64
	seed      maphash.Seed
	clock     sluice.Clock // nil: the fast system clock
	perShard  int
	maxKeyLen int
	evictions atomic.Int64
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	counters  counterTable // window counters and heartbeats (counters.go)
}

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
	_  [40]byte // keep shards on separate cache lines
}

type entry struct {
	state   algorithm.State
	expires int64 // Unix ns at which the state is back to full
}

// Option configures a Store.
type Option interface{ apply(*config) }

type config struct {
	clock         sluice.Clock
	maxKeys       int
	shards        int
	sweepInterval time.Duration
	maxKeyLen     int
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithClock sets the clock (default: the monotonic system clock). Tests pass a
// sluice.ManualClock.
func WithClock(c sluice.Clock) Option { return optionFunc(func(cfg *config) { cfg.clock = c }) }

// WithMaxKeys bounds the number of keys held (default DefaultMaxKeys). When a shard is full, a
// new key evicts an expired entry or, failing that, the sampled entry closest to full capacity.
func WithMaxKeys(n int) Option { return optionFunc(func(c *config) { c.maxKeys = n }) }

// WithShards sets the number of shards, rounded up to a power of two (default DefaultShards).
func WithShards(n int) Option { return optionFunc(func(c *config) { c.shards = n }) }

// WithSweepInterval sets how often idle keys are removed (default DefaultSweepInterval); a
// negative interval disables the background sweep (call Sweep yourself).
func WithSweepInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.sweepInterval = d })
}

// WithMaxKeyLength sets the longest accepted key in bytes (default sluice.DefaultMaxKeyLength).
func WithMaxKeyLength(n int) Option { return optionFunc(func(c *config) { c.maxKeyLen = n }) }

// New returns a memory store. Invalid option values (negative counts) are an error naming
// the option.
func New(opts ...Option) (*Store, error) {
	cfg := config{maxKeys: DefaultMaxKeys, shards: DefaultShards, sweepInterval: DefaultSweepInterval}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case cfg.maxKeys <= 0:
		return nil, fmt.Errorf("memory: WithMaxKeys: must be positive, got %d", cfg.maxKeys)
	case cfg.shards <= 0:
		return nil, fmt.Errorf("memory: WithShards: must be positive, got %d", cfg.shards)
	case cfg.sweepInterval == 0:
		return nil, fmt.Errorf("memory: WithSweepInterval: must be non-zero (negative disables)")
	case cfg.maxKeyLen < 0:
		return nil, fmt.Errorf("memory: WithMaxKeyLength: must not be negative, got %d", cfg.maxKeyLen)
	}
	n := 1
	for n < cfg.shards {
		n <<= 1
	}
	n = min(n, max(1, cfg.maxKeys)) // every shard can hold at least one key
	for n&(n-1) != 0 {
		n &= n - 1
	}
	s := &Store{
		shards:    make([]shard, n),
		mask:      uint64(n - 1),
		seed:      maphash.MakeSeed(),
		clock:     cfg.clock,
		perShard:  max(1, cfg.maxKeys/n),
		maxKeyLen: cfg.maxKeyLen,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
	}
	if cfg.sweepInterval > 0 {
		go s.sweepLoop(cfg.sweepInterval)
	} else {
		close(s.done)
	}
	return s, nil
}

func (s *Store) now() int64 {
	if s.clock == nil {
		return sluice.SystemClock{}.UnixNano()
	}
	return s.clock.Now().UnixNano()
}

// Take implements sluice.Store.
func (s *Store) Take(_ context.Context, req sluice.Request) (sluice.Decision, error) {
	if err := req.Validate(s.maxKeyLen); err != nil {
		return sluice.Decision{}, err
	}
	now := s.now()
	sh := &s.shards[maphash.String(s.seed, req.Key)&s.mask]
	sh.mu.Lock()
	e := sh.m[req.Key]
	if e == nil {
		e = &entry{state: algorithm.New(req.Rule.Algorithm)}
		d := e.state.Take(now, req.Rule, req.N, int64(req.MaxDelay))
		if d.ResetAfter > 0 { // a peek or refund on an absent key leaves nothing to keep
			e.expires = now + int64(d.ResetAfter)
			sh.insert(strings.Clone(req.Key), e, now, s.perShard, &s.evictions)
		}
		sh.mu.Unlock()
		return d, nil
	}
	if e.state.Algorithm() != req.Rule.Algorithm {
		e.state = algorithm.New(req.Rule.Algorithm) // a new algorithm starts from full
	}
	d := e.state.Take(now, req.Rule, req.N, int64(req.MaxDelay))
	e.expires = now + int64(d.ResetAfter)
	sh.mu.Unlock()
	return d, nil
}

// insert adds e under key, evicting first when the shard is full.
func (sh *shard) insert(key string, e *entry, now int64, limit int, evictions *atomic.Int64) {
	if len(sh.m) >= limit {
		var victim string
		oldest := int64(1<<63 - 1)
		i := 0
		for k, v := range sh.m { // map iteration starts at a random place: a random sample
			if v.expires <= now {
				victim = k
				break
			}
			if v.expires < oldest {
				victim, oldest = k, v.expires
			}
			if i++; i == evictionSamples {
				break
			}
		}
		if sh.m[victim].expires > now {
			evictions.Add(1)
		}
		delete(sh.m, victim)
	}
	sh.m[key] = e
}

// Sweep removes every key whose state is back to full capacity. The background sweep calls
// it; tests with a manual clock call it directly.
func (s *Store) Sweep() {
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if e.expires <= now {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}

func (s *Store) sweepLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Len reports the number of keys held, including idle ones not yet swept.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Evictions reports how many keys with live state were evicted to respect the maximum key
// count. Each one may let its key admit up to its limit again.
func (s *Store) Evictions() int64 { return s.evictions.Load() }

// Close stops the background sweep. Decisions still work after Close.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}
