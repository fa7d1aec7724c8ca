// Package memory is Sluice's embedded store: per-key algorithm state in a sharded map inside
// the process. It is the default store of the service and the reference the other stores are
// held to. Decisions on existing keys allocate nothing.
//
// Idle keys expire when their state is back to full capacity (nothing is lost by forgetting
// them); a background sweep removes them, and a maximum key count and a byte budget bound
// memory under a flood of unique keys by evicting the entries that cost least to forget.
//
// Eviction never lets a key admit past its limit because of a flood: a key keeps its state
// until it is back to full once it was decided more than once, and whenever a request of one
// unit would find it denied (at its limit, or in debt after a settle). A new key past the
// bounds evicts a key back to full or else, among a sample, a key decided only once that still
// admits, the one that used the fewest units (then the one idle longest): its next request
// may use again that one request's units, fewer than its capacity. When no sampled key may be
// forgotten, the new key is refused with ErrFull (wrapping sluice.ErrStoreUnavailable), for
// the caller's failure policy to decide. Size WithMaxKeys and WithMaxBytes for the keys in use
// within their periods.
package memory

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/fastpath"
	"github.com/sluicehq/sluice/internal/monotime"
)

// Defaults for the options.
const (
	DefaultMaxKeys       = 1 << 20
	DefaultMaxBytes      = 1 << 30 // 1 GiB: DefaultMaxKeys small states take about 170 MB
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
	clock     sluice.Clock // nil: the monotonic clock, or the coarse clock where allowed
	coarse    bool         // WithCoarseClock: rules that tolerate it read the coarse clock
	perShard  int
	maxBytes  int64
	bytes     atomic.Int64 // the charges (entryBytes) of the entries held
	maxKeyLen int
	evictions atomic.Int64
	rules     algorithm.ParamsCache
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	counters  counterTable // window counters and heartbeats (counters.go)
	leases    leaseTable   // the leases of concurrency limits (leases.go)
}

// Option configures a Store.
type Option interface{ apply(*config) }

type config struct {
	clock         sluice.Clock
	coarse        bool
	maxKeys       int
	maxBytes      int64
	shards        int
	sweepInterval time.Duration
	maxKeyLen     int
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithClock sets the clock every decision reads (default: the monotonic system clock, see
// WithCoarseClock). Tests pass a sluicetest.ManualClock. With a clock set, WithCoarseClock has no
// effect.
func WithClock(c sluice.Clock) Option { return optionFunc(func(cfg *config) { cfg.clock = c }) }

// WithCoarseClock chooses whether decisions on the rules that can afford it read the coarse
// clock (default true). The coarse clock is a process-wide time that one background goroutine
// refreshes every 500 µs (parked after a second without readers): reading it is an atomic load
// instead of a monotonic clock read, which saves about a quarter of a decision. Its time lags
// real time by up to one 500 µs tick (more when the process is starved of CPU) and never runs
// backwards.
//
// Accuracy: it is used only for rules whose refill in one tick, Limit x 500 µs / Period, is at
// most 1% of their capacity (algorithm.Params.ToleratesTick): 100 a second, 1,000 a minute,
// 10^6 a second with a burst of 10^6. A decision on such a rule differs from one on the precise
// clock by at most 1% of the capacity. Other rules, such as 10,000 a second with a burst of 1,
// always read the precise clock. WithCoarseClock(false) makes every decision read the precise
// monotonic clock.
func WithCoarseClock(on bool) Option { return optionFunc(func(c *config) { c.coarse = on }) }

// WithMaxKeys bounds the number of keys held (default DefaultMaxKeys). When a shard is full, a
// new key evicts an expired entry or, failing that, the sampled entry that costs least to
// forget: never one decided more than once before it is back to full, nor one over its limit
// or in debt; when no sampled entry may be forgotten, the new key is refused with ErrFull (see
// the package doc).
func WithMaxKeys(n int) Option { return optionFunc(func(c *config) { c.maxKeys = n }) }

// WithMaxBytes bounds the bytes the keys hold (default DefaultMaxBytes), as each key is
// charged: its entry and index slot (160 bytes), its key when longer than 48 bytes, and the
// most state its rule can hold (algorithm.StateBytes: 16 bytes per unit of a sliding log's
// limit, its timestamps and as many again while a settle keeps the key in debt). A new key
// that would take the store over the budget first evicts, from its own shard and a few others,
// expired entries or else the sampled entries that cost least to forget, as WithMaxKeys does,
// or is refused with ErrFull; a key is kept even when it alone is over the budget. The charge is the most a key can hold, so the heap stays
// under the budget whatever its keys later do, and a big sliding log held lightly is charged
// for its limit.
func WithMaxBytes(n int64) Option { return optionFunc(func(c *config) { c.maxBytes = n }) }

// WithShards sets the number of shards, rounded up to a power of two (default DefaultShards,
// at most 65,536).
func WithShards(n int) Option { return optionFunc(func(c *config) { c.shards = n }) }

// maxShards bounds WithShards: the shards are allocated up front.
const maxShards = 1 << 16

// WithSweepInterval sets how often idle keys are removed (default DefaultSweepInterval); a
// negative interval disables the background sweep (call Sweep yourself).
func WithSweepInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.sweepInterval = d })
}

// WithMaxKeyLength sets the longest accepted key in bytes (default sluice.DefaultMaxKeyLength).
func WithMaxKeyLength(n int) Option { return optionFunc(func(c *config) { c.maxKeyLen = n }) }

// New returns a memory store. Invalid option values (negative counts) are an error naming
// the option.
//
// By default decisions read the monotonic clock, or the coarse clock (500 µs ticks) for the
// rules whose decisions it moves by at most 1% of their capacity; pass WithCoarseClock(false)
// for the precise clock on every decision, or WithClock for a clock of your own.
func New(opts ...Option) (*Store, error) {
	cfg := config{coarse: true, maxKeys: DefaultMaxKeys, maxBytes: DefaultMaxBytes, shards: DefaultShards, sweepInterval: DefaultSweepInterval}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case cfg.maxKeys <= 0:
		return nil, fmt.Errorf("memory: WithMaxKeys: must be positive, got %d", cfg.maxKeys)
	case cfg.maxBytes <= 0:
		return nil, fmt.Errorf("memory: WithMaxBytes: must be positive, got %d", cfg.maxBytes)
	case cfg.shards <= 0 || cfg.shards > maxShards:
		return nil, fmt.Errorf("memory: WithShards: must be in [1, %d], got %d", maxShards, cfg.shards)
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
		coarse:    cfg.coarse,
		perShard:  max(1, cfg.maxKeys/n),
		maxBytes:  cfg.maxBytes,
		maxKeyLen: cmp.Or(cfg.maxKeyLen, sluice.DefaultMaxKeyLength),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].tab.Store(newTable(minTable))
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

// nowFor reads the store's clock for a decision under p: the configured clock if any, else the
// coarse clock for rules that tolerate its tick (see WithCoarseClock) and the precise
// monotonic clock for the others.
func (s *Store) nowFor(p *algorithm.Params) int64 {
	switch {
	case s.clock != nil:
		return s.clock.Now().UnixNano()
	case s.coarseFor(p):
		return coarseNow()
	}
	return monotime.UnixNano()
}

// coarseFor reports whether decisions under p read the coarse clock (see nowFor). Entries
// keep the answer for their rule (entry.coarse), which saves TakeLocal the test.
func (s *Store) coarseFor(p *algorithm.Params) bool {
	return s.clock == nil && s.coarse && p != nil && p.ToleratesTick(int64(coarseResolution))
}

// hash returns the key's 64-bit hash, never 0 (an empty slot of the index).
func (s *Store) hash(key string) uint64 {
	if h := maphash.String(s.seed, key); h != 0 {
		return h
	}
	return 1
}

// Take implements sluice.Store.
func (s *Store) Take(_ context.Context, req sluice.Request) (sluice.Decision, error) {
	if err := req.ValidateArgs(s.maxKeyLen); err != nil {
		return sluice.Decision{}, err
	}
	sh, h, e := s.locked(req.Key, &req.Rule)
	if e != nil {
		now := s.nowFor(e.params)
		var d sluice.Decision
		var err error
		if algorithm.TakeDecides(req.Kind()) { // Apply's common case, inline: its call cost Take 3-13%
			d = e.state.Take(now, e.params, req.N, int64(req.MaxDelay))
		} else {
			d, err = e.apply(now, &req)
		}
		e.expires = now + int64(d.ResetAfter)
		e.markReturned()
		e.mu.Unlock()
		return d, err
	}
	return s.takeSlow(sh, h, req)
}

var _ fastpath.Local[sluice.Rule] = (*Store)(nil)

// TakeLocal is Take(ctx, Request{Key: key, Rule: rule, N: n}) with the arguments and the
// Decision's fields in registers (Limit is rule.Capacity() and Delay 0), for
// sluice.Limiter.AllowN: it saves a third of its decision. Code outside this module cannot
// call it (see internal/fastpath).
func (s *Store) TakeLocal(_ fastpath.Token, key string, rule sluice.Rule, n int64) (allowed bool, remaining int64, retryAfter, resetAfter time.Duration, err error) {
	if len(key) == 0 || len(key) > s.maxKeyLen || n < -sluice.MaxLimit {
		_, err := s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: n})
		return false, 0, 0, 0, err
	}
	// locked, spelled out: it is not inlined, and the call costs the parallel benchmark a few
	// ns per decision.
	h := s.hash(key)
	sh := &s.shards[h&s.mask]
	if e := sh.tab.Load().find(h, key); e != nil {
		e.mu.Lock()
		if e.dead || !sameRule(&e.params.Rule, &rule) {
			e.mu.Unlock()
			d, err := s.takeSlow(sh, h, sluice.Request{Key: key, Rule: rule, N: n})
			return d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, err
		}
		// The small states are called directly rather than through the interface, and answer
		// in registers: both save copying a Decision through memory.
		// nowFor(e.params), its common case inline: a running coarse clock already read
		// this tick (a call and the rule's test saved).
		var now int64
		if e.coarse && coarseMarked() {
			now = coarse.now.Load()
		} else {
			now = s.nowFor(e.params)
		}
		var retry, reset int64
		tok := fastpath.Token{}
		switch st := e.state.(type) {
		case *algorithm.GCRA:
			allowed, remaining, retry, reset = st.TakeScalar(tok, now, e.params, n)
		case *algorithm.TokenBucket:
			allowed, remaining, retry, reset = st.TakeScalar(tok, now, e.params, n)
		case *algorithm.LeakyBucket:
			allowed, remaining, retry, reset = st.TakeScalar(tok, now, e.params, n)
		case *algorithm.FixedWindow:
			allowed, remaining, retry, reset = st.TakeScalar(tok, now, e.params, n)
		default:
			d := e.state.Take(now, e.params, n, 0)
			allowed, remaining, retry, reset = d.Allowed, d.Remaining, int64(d.RetryAfter), int64(d.ResetAfter)
		}
		e.expires = now + reset
		e.markReturned()
		e.mu.Unlock()
		return allowed, remaining, time.Duration(retry), time.Duration(reset), nil
	}
	d, err := s.takeSlow(sh, h, sluice.Request{Key: key, Rule: rule, N: n})
	return d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, err
}

// locked returns key's shard and hash and, when the key exists under exactly this rule (the
// common case), its entry with the entry's mutex held; otherwise a nil entry, for takeSlow.
func (s *Store) locked(key string, rule *sluice.Rule) (*shard, uint64, *entry) {
	h := s.hash(key)
	sh := &s.shards[h&s.mask]
	if e := sh.tab.Load().find(h, key); e != nil {
		e.mu.Lock()
		if !e.dead && sameRule(&e.params.Rule, rule) {
			return sh, h, e
		}
		e.mu.Unlock()
	}
	return sh, h, nil
}

// sameRule is r == *o, field by field: cheaper than the generated struct comparison.
func sameRule(r, o *sluice.Rule) bool {
	return r.Limit == o.Limit && r.Period == o.Period && r.Algorithm == o.Algorithm &&
		r.Burst == o.Burst && r.SubWindows == o.SubWindows
}

// takeSlow decides for a key that is absent, was removed under the caller, or whose rule
// changed: the rule is validated and compiled before any lock is taken.
func (s *Store) takeSlow(sh *shard, h uint64, req sluice.Request) (sluice.Decision, error) {
	if err := req.Rule.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	params := s.compiled(req.Rule)
	charge := entryBytes(req.Key, req.Rule)
	for {
		e := sh.tab.Load().find(h, req.Key)
		if e == nil {
			sh.mu.Lock()
			if e = sh.tab.Load().find(h, req.Key); e == nil {
				d, err := s.takeNew(sh, h, req, params, charge)
				sh.mu.Unlock()
				return d, err
			}
			sh.mu.Unlock()
		}
		e.mu.Lock()
		if e.dead { // removed since it was found: look again
			e.mu.Unlock()
			continue
		}
		// A new rule whose state may hold more: room is made first (e itself may be forgotten,
		// then the key is new), or the request is refused and the key keeps its rule. A key
		// alone in the store is kept over the budget, as a new one is.
		if grow := int64(charge) - int64(e.bytes); grow > 0 && s.bytes.Load()+grow > s.maxBytes && s.bytes.Load() > int64(e.bytes) {
			e.mu.Unlock()
			sh.mu.Lock()
			ok := s.makeRoom(sh, grow)
			sh.mu.Unlock()
			if !ok {
				return sluice.Decision{}, ErrFull
			}
			continue
		}
		if e.state.Algorithm() != req.Rule.Algorithm {
			e.state = e.newState(req.Rule.Algorithm) // a new algorithm starts from full
		}
		e.params, e.coarse = params, s.coarseFor(params)
		if charge != e.bytes { // a new rule: its state may hold more (or less)
			s.bytes.Add(int64(charge) - int64(e.bytes))
			e.bytes = charge
		}
		now := s.nowFor(params)
		d, err := e.apply(now, &req)
		e.expires = now + int64(d.ResetAfter)
		e.markReturned()
		e.mu.Unlock()
		return d, err
	}
}

// entryBytes is what a key under rule r is charged against WithMaxBytes: the entry and its
// index slot, the key when it does not fit in the entry, and the most state r can hold.
func entryBytes(key string, r sluice.Rule) uint32 {
	b := int64(entryCharge)
	if len(key) > len(entry{}.buf) {
		b += int64(len(key))
	}
	if !r.Algorithm.Bucket() && r.Algorithm != sluice.AlgorithmGCRA && r.Algorithm != sluice.AlgorithmFixedWindow {
		b += algorithm.StateBytes(r) + stateHeader // held apart from the entry
	}
	return uint32(min(b, math.MaxUint32))
}

// entryCharge is an entry (128 bytes) and its index slot (16 bytes at a load of at most 3/4);
// stateHeader, a state held apart: its struct and allocation rounding.
const (
	entryCharge = 160
	stateHeader = 64
)

// takeNew decides for an absent key, and keeps its entry when the decision left state behind
// (a peek or refund on an absent key leaves nothing to keep, nor does a budget step that left
// no reservation open); sh.mu is held.
func (s *Store) takeNew(sh *shard, h uint64, req sluice.Request, params *algorithm.Params, charge uint32) (sluice.Decision, error) {
	now := s.nowFor(params)
	e := newEntry(req.Rule.Algorithm, req.Key, params)
	e.coarse = s.coarseFor(params)
	e.bytes = charge
	d, err := e.apply(now, &req)
	e.expires, e.seen = now+int64(d.ResetAfter), first(now)
	if e.until() <= now {
		return d, err
	}
	if sh.n >= s.perShard && !s.evictFrom(sh) || !s.makeRoom(sh, int64(charge)) {
		return sluice.Decision{}, ErrFull
	}
	s.bytes.Add(int64(charge))
	sh.insert(h, e)
	return d, err
}

// compiled returns the shared compiled form of a valid rule (see algorithm.ParamsCache).
func (s *Store) compiled(r sluice.Rule) *algorithm.Params { return s.rules.Get(r) }

// Sweep removes every key whose state is back to full capacity, and shrinks tables left
// mostly empty. The background sweep calls it; tests with a manual clock call it directly.
func (s *Store) Sweep() {
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		t := sh.tab.Load()
		for j := range t.slots {
			sl := &t.slots[j]
			e := sl.e.Load()
			if e == nil {
				continue
			}
			e.mu.Lock()
			if e.until() <= now {
				sh.kill(sl, e, &s.bytes)
			}
			e.mu.Unlock()
		}
		if len(t.slots) > minTable && sh.n*8 < len(t.slots) {
			sh.rebuild(2 * sh.n)
		}
		sh.mu.Unlock()
	}
	s.sweepLeases(now)
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

// Bytes reports the bytes the keys held are charged against WithMaxBytes (see there),
// including idle ones not yet swept.
func (s *Store) Bytes() int64 { return s.bytes.Load() }

// Evictions reports how many keys with live state were evicted to respect the maximum key
// count or the byte budget: keys decided once, each of which may use again the units of that
// one request (see the package doc).
func (s *Store) Evictions() int64 { return s.evictions.Load() }

// Close stops the background sweep. Decisions still work after Close.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}
