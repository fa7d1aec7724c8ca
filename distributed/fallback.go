package distributed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/shardmap"
)

// Defaults of Fallback.
const (
	DefaultFallbackTimeout   = 50 * time.Millisecond
	DefaultFailures          = 3
	DefaultProbeInterval     = 100 * time.Millisecond
	DefaultHeartbeatInterval = time.Second
	DefaultGroup             = "default"
)

// errTimeout marks a store call that outlived the Fallback's timeout.
var errTimeout = errors.New("distributed: store did not answer within the timeout")

// Fallback is a Store decorator for store failures. While the store answers, decisions are
// the store's. When a call fails with sluice.ErrStoreUnavailable or takes longer than the
// timeout, that request is decided by policy at once; after K consecutive failures, or one
// timeout, the circuit opens: no more store calls, every decision is made by policy, and the
// store is probed in the background until it answers within the timeout. Then the outage is
// written back to it (what the local limiter admitted, as settles; see below) and, one probe
// interval later, decisions go back to it. No decision waits longer than the timeout, provided the store honours its
// context (every Sluice store does): the call runs in the caller's goroutine under a context
// deadline. When to probe and when to send a heartbeat are decided on the Fallback's clock
// (WithClock); WithManualProbe hands both to the caller (Probe).
//
// FailLocal (the default) keeps the global budget: each instance decides with a local
// limiter (a memory store) whose limit is the rule's limit divided by the number of live
// instances. Instances count themselves with heartbeats in the store (sluice.Heartbeater,
// when the store has it; the last count is kept while it is down); WithInstances gives the
// count for stores without it and before the first heartbeat, and WithSafeCapacity overrides
// both. So the fleet admits at most about one limit per period during an outage, not one per
// instance. Neither switch hands out a fresh budget: the local limiter starts each key from
// the last store decision this instance saw on it (its share of what the store had left), and
// before decisions return to the store, the outage's admissions are written back to it, with
// what a restarted store forgot (WithMaxKeys bounds the keys remembered); a bucket's key is
// written back as its local level. Between the write-back and the switch back (one probe
// interval) a window algorithm's key that was written back is denied locally, so that no unit
// is written to one store window twice.
//
// Fallback is safe for concurrent use.
type Fallback struct {
	next    sluice.Store
	breaker breaker    // the circuit: closed, open, probed
	ledger  *ledger    // what FailLocal decides while open, and what that owes the store
	members membership // the count of live instances, for the local share
	policy  func(sluice.Rule) FailurePolicy
	timeout time.Duration
	onError func(err error)

	leases fallbackLeases // the leases acquired through it (leases.go)
	// down is true while the circuit is open because the store failed with errors (K in a
	// row), false when a timeout or a late answer opened it: a slow store, which still holds
	// the fleet's leases, so in-flight limits keep asking it (leases.go).
	down atomic.Bool

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup // the heartbeat loop
	once   sync.Once
}

type fallbackConfig struct {
	clock     sluice.Clock
	timeout   time.Duration
	failures  int
	probe     time.Duration
	heartbeat time.Duration
	policy    FailurePolicy
	policyFn  func(sluice.Rule) FailurePolicy
	instances int
	maxKeys   int
	safe      float64
	group, id string
	onChange  func(from, to Circuit)
	onError   func(err error)
	manual    bool
}

// NewFallback wraps store. Its options are WithClock, WithTimeout, WithFailures,
// WithProbeInterval, WithHeartbeat, WithFailurePolicy, WithFailurePolicyFunc, WithInstances,
// WithSafeCapacity, WithGroup, WithInstanceID, WithManualProbe, OnCircuitChange and
// OnStoreError; another option, or an invalid value, is an error naming the option.
func NewFallback(store sluice.Store, opts ...Option) (*Fallback, error) {
	cfg := fallbackConfig{timeout: DefaultFallbackTimeout, failures: DefaultFailures, probe: DefaultProbeInterval,
		heartbeat: DefaultHeartbeatInterval, policy: FailLocal, instances: 1, maxKeys: DefaultFallbackMaxKeys,
		group: DefaultGroup}
	if err := applyOptions("NewFallback", opts, &cfg, func(o Option) func(*fallbackConfig) { return o.fallback }); err != nil {
		return nil, err
	}
	if err := cfg.check(store); err != nil {
		return nil, err
	}
	if cfg.id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.id = hex.EncodeToString(b[:])
	}
	localClock := cfg.clock // nil: the local limiters read the memory store's own clock
	if cfg.clock == nil {
		cfg.clock = sluice.SystemClock{}
	}
	f := &Fallback{next: store, timeout: cfg.timeout, onError: cfg.onError, stop: make(chan struct{})}
	f.members = membership{clock: cfg.clock, group: cfg.group, id: cfg.id, interval: cfg.heartbeat,
		timeout: cfg.timeout, safe: cfg.safe, stop: f.stop}
	f.members.instances.Store(int64(cfg.instances))
	f.ledger = &ledger{next: store, clock: cfg.clock, timeout: cfg.timeout, stop: f.stop, breaker: &f.breaker,
		members: &f.members, seen: shardmap.New(cfg.maxKeys, seenRemaining)}
	if err := f.ledger.open(localClock); err != nil {
		return nil, err
	}
	f.breaker = breaker{clock: cfg.clock, failures: int64(cfg.failures), interval: cfg.probe, manual: cfg.manual,
		check: f.probeStore, opening: f.ledger.freeze, closing: f.ledger.thaw, onChange: cfg.onChange, stop: f.stop}
	f.breaker.init()
	f.policy = func(sluice.Rule) FailurePolicy { return cfg.policy }
	if fn := cfg.policyFn; fn != nil {
		f.policy = func(r sluice.Rule) FailurePolicy {
			if p := fn(r); p.Valid() {
				return p
			}
			return FailLocal
		}
	}
	if reg, ok := store.(sluice.Heartbeater); ok {
		f.members.registry = reg
		_ = f.sendHeartbeat(context.Background()) // a first count before any decision
		if !cfg.manual {
			f.wg.Add(1)
			go f.heartbeatLoop()
		}
	}
	return f, nil
}

func (c *fallbackConfig) check(store sluice.Store) error {
	switch {
	case store == nil:
		return fmt.Errorf("distributed: NewFallback: %w", sluice.ErrNoStore)
	case c.timeout <= 0:
		return fmt.Errorf("distributed: WithTimeout: must be positive, got %v", c.timeout)
	case c.failures <= 0:
		return fmt.Errorf("distributed: WithFailures: must be positive, got %d", c.failures)
	case c.probe <= 0:
		return fmt.Errorf("distributed: WithProbeInterval: must be positive, got %v", c.probe)
	case c.heartbeat <= 0:
		return fmt.Errorf("distributed: WithHeartbeat: must be positive, got %v", c.heartbeat)
	case !c.policy.Valid():
		return fmt.Errorf("distributed: WithFailurePolicy: unknown policy %d (want local, fail_open or fail_closed)", uint8(c.policy))
	case c.maxKeys <= 0:
		return fmt.Errorf("distributed: WithMaxKeys: must be positive, got %d", c.maxKeys)
	case c.instances <= 0:
		return fmt.Errorf("distributed: WithInstances: must be positive, got %d", c.instances)
	case c.safe < 0 || c.safe > 1 || c.safe != c.safe:
		return fmt.Errorf("distributed: WithSafeCapacity: must be in (0, 1], got %v", c.safe)
	}
	return nil
}

// Circuit reports the circuit's current state.
func (f *Fallback) Circuit() Circuit { return f.breaker.circuit() }

// Instances reports the last known number of live instances.
func (f *Fallback) Instances() int { return int(f.members.instances.Load()) }

// Take implements sluice.Store.
func (f *Fallback) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if f.closed.Load() {
		return sluice.Decision{}, fmt.Errorf("distributed: fallback: %w", sluice.ErrClosed)
	}
	if f.Circuit() == CircuitOpen {
		return f.decideLocally(ctx, req)
	}
	d, late, err := f.call(ctx, req)
	if err == nil {
		f.ledger.remember(&req, &d)
	}
	if f.observe(err, late) {
		return f.decideLocally(ctx, req)
	}
	return d, err // an answer, or bad input, or the caller's context ended: not the store's fault
}

// observe records the outcome of a store call on the circuit, and reports whether the store
// failed it, so that the request is decided by policy: an error wrapping ErrStoreUnavailable
// (K in a row open the circuit) or the timeout (which opens it at once). An answer after the
// timeout is kept, but opens the circuit too.
func (f *Fallback) observe(err error, late bool) (failed bool) {
	switch {
	case err == nil:
		f.breaker.succeeded()
		if late {
			f.storeFailed(fmt.Errorf("distributed: the store answered after the timeout (%v): %w", f.timeout, sluice.ErrStoreUnavailable))
			f.openSlow() // the store answered, but too slowly: stop asking it
		}
		return false
	case late:
		f.storeFailed(fmt.Errorf("%w (%v): %w", errTimeout, f.timeout, err))
		f.openSlow()
		return true
	case sluice.IsUnavailable(err):
		f.storeFailed(err)
		f.failed()
		return true
	}
	return false
}

// openSlow opens the circuit because the store was too slow (a timeout or a late answer).
func (f *Fallback) openSlow() {
	if f.Circuit() == CircuitClosed {
		f.down.Store(false)
	}
	f.breaker.open()
}

// failed counts a store failure (an error wrapping ErrStoreUnavailable) and opens the circuit
// at the K-th in a row: the store is down.
func (f *Fallback) failed() {
	if f.breaker.failed() {
		if f.Circuit() == CircuitClosed {
			f.down.Store(true)
		}
		f.breaker.open()
	}
}

// storeFailed reports a store failure the Fallback absorbs to the OnStoreError hook.
func (f *Fallback) storeFailed(err error) {
	if f.onError != nil {
		f.onError(err)
	}
}

// call asks the store under a deadline of the timeout, in the caller's goroutine: no goroutine
// or channel per decision. late reports that the deadline passed during the call (the
// caller's own context still live), so the store answered too late or not at all. Every
// Sluice store honours its context; a store that ignores it holds the decision as long as it
// blocks.
func (f *Fallback) call(ctx context.Context, req sluice.Request) (d sluice.Decision, late bool, err error) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= f.timeout {
		d, err = f.next.Take(ctx, req) // the caller's deadline is already the tighter bound
		return d, false, err
	}
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	d, err = f.next.Take(cctx, req)
	late = cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	return d, late, err
}

// decideLocally applies the rule's policy.
func (f *Fallback) decideLocally(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if req.Kind().Budget() {
		return f.decideBudgetLocally(ctx, req)
	}
	switch f.policy(req.Rule) {
	case FailOpen:
		if err := req.Validate(0); err != nil {
			return sluice.Decision{}, err
		}
		c := req.Rule.Capacity()
		return sluice.Decision{Allowed: true, Capacity: c, Remaining: c}, nil
	case FailClosed:
		if err := req.Validate(0); err != nil {
			return sluice.Decision{}, err
		}
		// A settle is not a request to admit: it is answered as applied (and lost).
		return sluice.Decision{Allowed: req.Settle, Capacity: req.Rule.Capacity(), RetryAfter: f.breaker.interval}, nil
	}
	return f.ledger.decideLocal(ctx, req, f.ledger.fraction())
}

// decideBudgetLocally applies the rule's policy to a budget step while the store is out. A
// reserve or an extension is admitted (FailOpen, holding nothing), refused (FailClosed), or
// decided on the local limiter with this instance's share of the rule (FailLocal), which then
// holds the reservation; what the local limiter holds is not written back. A commit is
// answered as applied, as a settle is (its cost is lost with the outage), unless the local
// limiter holds the reservation and settles it.
func (f *Fallback) decideBudgetLocally(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if err := req.Validate(0); err != nil {
		return sluice.Decision{}, err
	}
	policy := f.policy(req.Rule)
	if policy != FailOpen && policy != FailClosed {
		local := req
		local.Rule = share(req.Rule, f.ledger.fraction())
		d, err := f.ledger.local.Take(ctx, local)
		if !errors.Is(err, sluice.ErrNoReservation) || req.Budget.Op != sluice.BudgetCommit {
			return d, err
		}
	}
	c := req.Rule.Capacity()
	switch {
	case req.Budget.Op == sluice.BudgetCommit, policy == FailOpen:
		return sluice.Decision{Allowed: true, Capacity: c, Remaining: c}, nil
	}
	return sluice.Decision{Capacity: c, RetryAfter: f.breaker.interval}, nil
}

// Probe runs the background work of a Fallback built WithManualProbe, at the instant of its
// clock: in the fallback state it probes the store, writes back the outage when the store
// answers within the timeout, and switches back to it at the next Probe that succeeds too
// (breaker.probe); in the store state it sends a heartbeat when one is due (a heartbeat
// interval after the last). It returns the probe's or heartbeat's error. A simulation calls
// it every probe interval of virtual time; on a Fallback with background probing it is a
// way to probe at once.
func (f *Fallback) Probe(ctx context.Context) error {
	if f.closed.Load() {
		return fmt.Errorf("distributed: fallback: %w", sluice.ErrClosed)
	}
	if f.Circuit() == CircuitOpen {
		_, err := f.breaker.probe(ctx)
		return err
	}
	if f.members.due() {
		return f.sendHeartbeat(ctx)
	}
	return nil
}

// probeStore is the breaker's check of an open circuit: it asks the store once, bounded by the
// timeout in real time (a heartbeat when the store counts instances, which also refreshes the
// count, else a peek), and when it answers in time writes the outage back to it
// (ledger.writeBack). A failure is reported to the OnStoreError hook.
func (f *Fallback) probeStore(ctx context.Context) error {
	var err error
	if f.members.counts() {
		err = f.members.beat(ctx)
	} else {
		req := sluice.Request{Key: "sluice:probe", Rule: sluice.FixedWindow(1, time.Second), N: 0}
		_, err = within(ctx, f.timeout, f.stop, func(ctx context.Context) (sluice.Decision, error) {
			return f.next.Take(ctx, req)
		})
	}
	if err == nil {
		err = f.ledger.writeBack(ctx)
	}
	f.reportFailed(ctx, "probe", err)
	return err
}

// heartbeatLoop sends a heartbeat every heartbeat interval of the Fallback's clock while the
// store is in use.
func (f *Fallback) heartbeatLoop() {
	defer f.wg.Done()
	for {
		select {
		case <-f.stop:
			return
		case <-f.members.clock.After(f.members.interval):
		}
		if f.Circuit() == CircuitClosed {
			_ = f.sendHeartbeat(context.Background())
		}
	}
}

// sendHeartbeat sends a heartbeat (membership.beat) and reports its failure to the
// OnStoreError hook.
func (f *Fallback) sendHeartbeat(ctx context.Context) error {
	err := f.members.beat(ctx)
	f.reportFailed(ctx, "heartbeat", err)
	return err
}

// reportFailed reports the failure of a probe or heartbeat to the OnStoreError hook, unless
// it failed because the Fallback closed or the caller's context ended.
func (f *Fallback) reportFailed(ctx context.Context, call string, err error) {
	if err != nil && !errors.Is(err, sluice.ErrClosed) && ctx.Err() == nil {
		f.storeFailed(fmt.Errorf("distributed: %s: %w", call, err))
	}
}

// within runs call in its own goroutine with a context that ends after timeout, and returns
// its result, or errTimeout when the timeout passes first (the call is left to finish on its
// own), or the context's error, or sluice.ErrClosed when stop closes.
func within(ctx context.Context, timeout time.Duration, stop <-chan struct{},
	call func(context.Context) (sluice.Decision, error)) (sluice.Decision, error) {
	type result struct {
		d   sluice.Decision
		err error
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ch := make(chan result, 1)
	go func() {
		d, err := call(cctx)
		ch <- result{d, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return r.d, fmt.Errorf("%w: %w", errTimeout, r.err)
		}
		return r.d, r.err
	case <-cctx.Done():
		if ctx.Err() != nil {
			return sluice.Decision{}, ctx.Err()
		}
		return sluice.Decision{}, errTimeout
	case <-stop:
		return sluice.Decision{}, sluice.ErrClosed
	}
}

// Flush flushes the wrapped store when it is a sluice.Flusher.
func (f *Fallback) Flush(ctx context.Context) error { return flushNext(ctx, f.next) }

// Close stops probing and heartbeats (without waiting for a store call in flight), flushes
// the wrapped store and releases the local limiter. It does not close the wrapped store.
func (f *Fallback) Close() error {
	var err error
	f.once.Do(func() {
		f.closed.Store(true)
		f.breaker.halt()
		close(f.stop)
		f.breaker.wg.Wait()
		f.wg.Wait()
		if f.Circuit() == CircuitClosed {
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			err = f.Flush(ctx)
		}
		err = errors.Join(err, f.ledger.close())
	})
	return err
}
