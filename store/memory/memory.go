// Package memory is Sluice's embedded store: per-key algorithm state in a sharded map inside
// the process. It is the default store of the service and the reference the other stores are
// held to. Decisions on existing keys allocate nothing.
//
// Idle keys expire when their state is back to full capacity (nothing is lost by forgetting
// them); a background sweep removes them, and a maximum key count bounds memory under a flood
// of unique keys by evicting the entries closest to full.
package memory

import (
	"cmp"
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
	maxCompiled          = 4096
)

// Store is the in-process store. It is safe for concurrent use. Build it with New; call Close
// to stop the background sweep.
type Store struct {
	shards    []shard
	mask      uint64
	seed      maphash.Seed
	clock     sluice.Clock // nil: the fast system clock
	coarse    bool         // clock is sluice.CoarseClock: read it without an interface call
	perShard  int
	maxKeyLen int
	evictions atomic.Int64
	rulesMu   sync.Mutex
	rules     map[sluice.Rule]*algorithm.Params
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	counters  counterTable // window counters and heartbeats (counters.go)
}

// shard maps the 64-bit hash of a key to its entry; the rare keys that share a hash are
// chained. Keying by the hash already computed to pick the shard saves hashing the string
// twice.
type shard struct {
	mu sync.Mutex
	m  map[uint64]*entry
	n  int       // entries, chained ones included
	_  [104]byte // keep shards on separate cache-line pairs (adjacent-line prefetch)
}

type entry struct {
	key     string
	params  *algorithm.Params // the rule of the last decision, compiled
	state   algorithm.State
	expires int64  // Unix ns at which the state is back to full
	next    *entry // another key with the same hash
}

// get returns the entry of key, or nil.
func (sh *shard) get(h uint64, key string) *entry {
	e := sh.m[h]
	for e != nil && e.key != key {
		e = e.next
	}
	return e
}

// remove unlinks the entry of key.
func (sh *shard) remove(h uint64, key string) {
	head := sh.m[h]
	if head == nil {
		return
	}
	if head.key == key {
		if head.next == nil {
			delete(sh.m, h)
		} else {
			sh.m[h] = head.next
		}
		sh.n--
		return
	}
	for p := head; p.next != nil; p = p.next {
		if p.next.key == key {
			p.next = p.next.next
			sh.n--
			return
		}
	}
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
// sluice.ManualClock; sluice.CoarseClock makes decisions about a quarter cheaper at 500 µs
// resolution.
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
		coarse:    cfg.clock == sluice.Clock(sluice.CoarseClock{}),
		perShard:  max(1, cfg.maxKeys/n),
		maxKeyLen: cmp.Or(cfg.maxKeyLen, sluice.DefaultMaxKeyLength),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		rules:     make(map[sluice.Rule]*algorithm.Params),
	}
	for i := range s.shards {
		s.shards[i].m = make(map[uint64]*entry)
	}
	if cfg.sweepInterval > 0 {
		go s.sweepLoop(cfg.sweepInterval)
	} else {
		close(s.done)
	}
	return s, nil
}

// now reads the store's clock for work not tied to one rule (sweeps, counters).
func (s *Store) now() int64 { return s.nowFor(nil) }

// nowFor reads the store's clock for a decision under p. Without a configured clock, rules that
// tolerate it (see algorithm.Params.ToleratesTick) read sluice.CoarseClock, a quarter of the
// cost of a decision, and the others the precise monotonic clock.
func (s *Store) nowFor(p *algorithm.Params) int64 {
	switch {
	case s.coarse:
		return sluice.CoarseClock{}.UnixNano()
	case s.clock != nil:
		return s.clock.Now().UnixNano()
	case p != nil && p.ToleratesTick(coarseTick):
		return sluice.CoarseClock{}.UnixNano()
	}
	return sluice.SystemClock{}.UnixNano()
}

const coarseTick = int64(sluice.CoarseResolution)

// Take implements sluice.Store.
func (s *Store) Take(_ context.Context, req sluice.Request) (sluice.Decision, error) {
	if err := req.ValidateArgs(s.maxKeyLen); err != nil {
		return sluice.Decision{}, err
	}
	sh, h, e := s.lock(req.Key, &req.Rule)
	if e == nil {
		return s.takeNew(sh, h, req)
	}
	now := s.nowFor(e.params)
	d := e.state.TakeParams(now, e.params, req.N, int64(req.MaxDelay))
	e.expires = now + int64(d.ResetAfter)
	sh.mu.Unlock()
	return d, nil
}

// TakeLocal implements sluice.LocalStore: Take for in-process callers, with arguments and
// results in registers. sluice.Limiter uses it for AllowN.
func (s *Store) TakeLocal(key string, rule sluice.Rule, n int64) (allowed bool, remaining int64, retryAfter, resetAfter time.Duration, err error) {
	if len(key) == 0 || len(key) > s.maxKeyLen || n < -sluice.MaxLimit {
		_, err := s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: n})
		return false, 0, 0, 0, err
	}
	sh, h, e := s.lock(key, &rule)
	if e == nil {
		d, err := s.takeNew(sh, h, sluice.Request{Key: key, Rule: rule, N: n})
		return d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, err
	}
	// The small states are called directly rather than through the interface, and the
	// Decision is taken apart field by field: both save copies of it through memory.
	now := s.nowFor(e.params)
	var d sluice.Decision
	switch st := e.state.(type) {
	case *algorithm.GCRA:
		d = st.TakeParams(now, e.params, n, 0)
	case *algorithm.TokenBucket:
		d = st.TakeParams(now, e.params, n, 0)
	case *algorithm.FixedWindow:
		d = st.TakeParams(now, e.params, n, 0)
	case *algorithm.LeakyBucket:
		d = st.TakeParams(now, e.params, n, 0)
	case *algorithm.SlidingWindow:
		d = st.TakeParams(now, e.params, n, 0)
	default:
		d = e.state.TakeParams(now, e.params, n, 0)
	}
	e.expires = now + int64(d.ResetAfter)
	sh.mu.Unlock()
	return d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, nil
}

// lock finds key's shard and hash, and returns with the shard locked and the key's entry when
// the key exists with exactly this rule (the common case). Otherwise the entry is nil and the
// shard unlocked, for takeNew.
func (s *Store) lock(key string, rule *sluice.Rule) (*shard, uint64, *entry) {
	h := maphash.String(s.seed, key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	if e := sh.get(h, key); e != nil && sameRule(&e.params.Rule, rule) {
		return sh, h, e
	}
	sh.mu.Unlock()
	return sh, h, nil
}

// sameRule is r == *o, field by field: cheaper than the generated struct comparison.
func sameRule(r, o *sluice.Rule) bool {
	return r.Limit == o.Limit && r.Period == o.Period && r.Algorithm == o.Algorithm &&
		r.Burst == o.Burst && r.SubWindows == o.SubWindows
}

// takeNew decides for a key that is absent or whose rule changed: the rule is validated and
// compiled before the shard is locked again.
func (s *Store) takeNew(sh *shard, h uint64, req sluice.Request) (sluice.Decision, error) {
	if err := req.Rule.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	params := s.compiled(req.Rule)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.nowFor(params)
	e := sh.get(h, req.Key)
	if e == nil {
		e = &entry{state: algorithm.New(req.Rule.Algorithm), params: params}
		d := e.state.TakeParams(now, params, req.N, int64(req.MaxDelay))
		if d.ResetAfter > 0 { // a peek or refund on an absent key leaves nothing to keep
			e.expires = now + int64(d.ResetAfter)
			e.key = strings.Clone(req.Key)
			s.insert(sh, h, e, now)
		}
		return d, nil
	}
	if e.state.Algorithm() != req.Rule.Algorithm {
		e.state = algorithm.New(req.Rule.Algorithm) // a new algorithm starts from full
	}
	e.params = params
	d := e.state.TakeParams(now, params, req.N, int64(req.MaxDelay))
	e.expires = now + int64(d.ResetAfter)
	return d, nil
}

// compiled returns the shared compiled form of a valid rule. Up to maxCompiled distinct rules
// are cached; past that each key gets its own copy.
func (s *Store) compiled(r sluice.Rule) *algorithm.Params {
	s.rulesMu.Lock()
	defer s.rulesMu.Unlock()
	if p, ok := s.rules[r]; ok {
		return p
	}
	p := algorithm.Compile(r)
	if len(s.rules) < maxCompiled {
		s.rules[r] = &p
	}
	return &p
}

// insert adds e under hash h, evicting first when the shard is full: an expired entry if the
// sample holds one, else the sampled entry closest to full capacity.
func (s *Store) insert(sh *shard, h uint64, e *entry, now int64) {
	if sh.n >= s.perShard {
		var victim *entry
		var victimHash uint64
		i := 0
		for vh, v := range sh.m { // map iteration starts at a random place: a random sample
			if victim == nil || v.expires < victim.expires {
				victim, victimHash = v, vh
			}
			if i++; i == evictionSamples || victim.expires <= now {
				break
			}
		}
		if victim.expires > now {
			s.evictions.Add(1)
		}
		sh.remove(victimHash, victim.key)
	}
	e.next = sh.m[h]
	sh.m[h] = e
	sh.n++
}

// Sweep removes every key whose state is back to full capacity. The background sweep calls
// it; tests with a manual clock call it directly.
func (s *Store) Sweep() {
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for h, e := range sh.m {
			for ; e != nil; e = e.next {
				if e.expires <= now {
					sh.remove(h, e.key)
				}
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
		n += sh.n
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
