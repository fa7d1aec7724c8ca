package sluice

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/fastpath"
)

// Limiter makes rate-limit decisions against a Store. It holds no per-key state of its own, so
// one Limiter serves any number of keys and rules, and several Limiters (in one process or
// many) sharing a store share its limits. It needs no Close. It is safe for concurrent use.
//
// Concurrency limits (at most N in flight) are held by a Leases, beside it: NewLeases.
type Limiter struct {
	settings
	store Store
	local localStore // store, when it decides in-process (store/memory)
}

// settings are what the options set, for a Limiter or a Leases.
type settings struct {
	clock          Clock
	maxWait        time.Duration
	shares         Shares
	onReleaseError func(error) // a Leases's only
}

func newSettings(opts []Option) settings {
	s := settings{clock: SystemClock{}}
	for _, o := range opts {
		o.apply(&s)
	}
	return s
}

// Option configures a Limiter or a Leases (NewLeases).
type Option interface{ apply(*settings) }

type optionFunc func(*settings)

func (f optionFunc) apply(s *settings) { f(s) }

// WithClock sets the clock Wait sleeps on, and a Leases renews and waits on (default
// SystemClock). The store keeps its own clock.
func WithClock(c Clock) Option { return optionFunc(func(s *settings) { s.clock = c }) }

// WithMaxWait bounds how long Wait may queue a request (default: one period of the rule). A
// request that would wait longer is refused at once with ErrWaitTooLong, consuming nothing.
// The context deadline, when sooner, bounds it too. On a Leases it bounds AcquireWait
// (default: the limit's lease time).
func WithMaxWait(d time.Duration) Option { return optionFunc(func(s *settings) { s.maxWait = d }) }

// WithShares sets the share of a rule's capacity (or of an in-flight limit, on a Leases)
// each criticality class may use (default DefaultShares; see AllowClass and
// Leases.AcquireClass). Invalid shares (Shares.Validate) are ignored.
func WithShares(sh Shares) Option {
	return optionFunc(func(s *settings) {
		if sh.Validate() == nil {
			s.shares = sh
		}
	})
}

// OnReleaseError sets a function a Leases calls with every release the store could not take
// (a Slot.Release, or the background release of a failed acquire's lease id; both counted in
// Leases.FailedReleases), for a log line: each such slot stays held, by nobody, until its
// lease expires. It is called in the releasing goroutine and must not block. A Limiter
// ignores it.
func OnReleaseError(f func(err error)) Option {
	return optionFunc(func(s *settings) { s.onReleaseError = f })
}

// New returns a Limiter deciding on store. A nil store makes every call fail with ErrNoStore.
func New(store Store, opts ...Option) *Limiter {
	l := &Limiter{settings: newSettings(opts), store: store}
	l.local, _ = store.(localStore)
	return l
}

// localStore is the memory store's side door for AllowN (see internal/fastpath): TakeLocal is
// Take for plain decisions, with no context, since nothing blocks, and with arguments and
// results that stay in registers, which saves a third of a memory-mode decision. The results
// are those of Take: Limit is rule.Capacity() and Delay is 0.
type localStore = fastpath.Local[Rule]

// Store returns the limiter's store.
func (l *Limiter) Store() Store { return l.store }

// Allow decides on one unit for key under rule.
func (l *Limiter) Allow(ctx context.Context, key string, rule Rule) (Decision, error) {
	return l.AllowN(ctx, key, rule, 1)
}

// AllowN decides on n units for key under rule. A denied request consumes nothing. n = 0 is
// Peek; a negative n refunds -n units.
func (l *Limiter) AllowN(ctx context.Context, key string, rule Rule, n int64) (Decision, error) {
	if l.local != nil {
		allowed, remaining, retry, reset, err := l.local.TakeLocal(fastpath.Token{}, key, rule, n)
		if err != nil {
			return Decision{}, err
		}
		return Decision{Allowed: allowed, Capacity: rule.Capacity(), Remaining: remaining, RetryAfter: retry, ResetAfter: reset}, nil
	}
	if l.store == nil {
		return Decision{}, ErrNoStore
	}
	return l.store.Take(ctx, Request{Key: key, Rule: rule, N: n})
}

// AllowClass decides n units of key under rule for a request of criticality class c: it is
// admitted only if, after it, at least the holdback of the classes above c remains (the
// capacity minus c's share, WithShares), so when the key nears its limit the lowest classes
// are refused first, on the one counter every class shares. In a fixed window, whose capacity
// returns all at once, a class may use only its share of what the window has let through so
// far (algorithm.TakeHoldback; docs/ALGORITHMS.md), so the lower classes cannot spend their
// shares at each window's start. A CRITICAL_PLUS request (share 100%) is decided as AllowN. Remaining is what c may still use. n must be positive. The
// store receives the class too (Request.Criticality).
func (l *Limiter) AllowClass(ctx context.Context, key string, rule Rule, n int64, c Criticality) (Decision, error) {
	holdback := l.shares.Holdback(c, rule.Capacity())
	if l.plain(holdback, c) {
		return l.AllowN(ctx, key, rule, n)
	}
	if l.store == nil {
		return Decision{}, ErrNoStore
	}
	return l.store.Take(ctx, Request{Key: key, Rule: rule, N: n, Holdback: holdback, Criticality: c})
}

// plain reports whether a request with holdback and class c is decided as AllowN: no
// holdback, and a class the store has no use for (the default, or a local store's).
func (l *Limiter) plain(holdback int64, c Criticality) bool {
	return holdback == 0 && (c == Critical || l.local != nil)
}

// Holdback returns what a request of class c must leave of rule's capacity under the
// limiter's shares: the holdback of the classes above c (see AllowClass and Check.Holdback).
func (l *Limiter) Holdback(c Criticality, rule Rule) int64 {
	return l.shares.Holdback(c, rule.Capacity())
}

// Settle applies delta units to key under rule whatever the limit, for a cost known only after
// the request was served (tokens generated, bytes sent, rows scanned): take an estimate
// with AllowN before the work, then settle the real cost minus the estimate. A negative delta
// refunds what was over-estimated; a positive one is charged even past the limit, so the key
// goes into debt and the next requests pay it before they are admitted again (each algorithm's
// debt and its bound: package algorithm, State.Settle). A client therefore cannot stay under
// its quota by sending cheap-looking requests. delta = 0 reports the key's state.
//
// The Decision is Allowed, with Remaining 0 while the key is in debt, RetryAfter how long
// until the debt is paid (0 when there is none) and ResetAfter until the key is back to full.
// |delta| must be at most MaxLimit. The store applies it atomically (Request.Settle).
func (l *Limiter) Settle(ctx context.Context, key string, rule Rule, delta int64) (Decision, error) {
	if l.store == nil {
		return Decision{}, ErrNoStore
	}
	return l.store.Take(ctx, Request{Key: key, Rule: rule, N: delta, Settle: true})
}

// Peek reports the key's state under rule without consuming: Remaining, ResetAfter, and
// Allowed false only when the key is over its limit (after a limit was lowered).
func (l *Limiter) Peek(ctx context.Context, key string, rule Rule) (Decision, error) {
	return l.AllowN(ctx, key, rule, 0)
}

// Wait blocks until one unit for key is admitted under rule, or fails at once when it could
// not be admitted in time. See WaitN.
func (l *Limiter) Wait(ctx context.Context, key string, rule Rule) error {
	return l.WaitN(ctx, key, rule, 1)
}

// WaitN shapes traffic: it blocks until n units are admitted for key under rule.
//
// For bucket algorithms it schedules a future slot in the shared state in one store call, so
// shaping holds across every process sharing the store: a token bucket or GCRA lets a burst
// through and then spaces requests at the rule's rate; a leaky bucket queues every request
// behind the ones before it, so requests leave evenly spaced, and refuses a request when its
// queue (Burst units) is full. For window algorithms WaitN sleeps until the store's RetryAfter
// and asks again.
//
// A request that would wait longer than the limit's bound (WithMaxWait, default one period)
// or the context's deadline is refused at once with ErrWaitTooLong and consumes nothing; one
// whose context ends while waiting is refunded and returns the context's error.
func (l *Limiter) WaitN(ctx context.Context, key string, rule Rule, n int64) error {
	if l.store == nil {
		return ErrNoStore
	}
	if n < 0 {
		return fieldError(ErrInvalidN, "n", "Wait needs n >= 0, got %d", n)
	}
	for {
		budget := l.maxWait
		if budget <= 0 {
			budget = rule.Period
		}
		if dl, ok := ctx.Deadline(); ok {
			budget = min(budget, dl.Sub(l.clock.Now()))
		}
		req := Request{Key: key, Rule: rule, N: n}
		if rule.Algorithm.Bucket() {
			req.MaxDelay = max(budget, 1)
		}
		d, err := l.store.Take(ctx, req)
		if err != nil {
			return err
		}
		if d.Allowed {
			if d.Delay <= 0 {
				return nil
			}
			if err := l.sleep(ctx, d.Delay); err != nil {
				l.refund(key, rule, n)
				return err
			}
			return nil
		}
		if d.RetryAfter < 0 {
			return fmt.Errorf("%w: n=%d exceeds the capacity %d of %s", ErrWaitTooLong, n, d.Capacity, rule)
		}
		if req.MaxDelay > 0 || d.RetryAfter > budget {
			return fmt.Errorf("%w: %s: n=%d would wait %v, more than %v", ErrWaitTooLong, rule, n, d.RetryAfter+req.MaxDelay, budget)
		}
		if err := l.sleep(ctx, d.RetryAfter); err != nil {
			return err
		}
	}
}

func (l *Limiter) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-l.clock.After(d):
		return nil
	}
}

// refund gives back n units after an abandoned wait or a failed layered check. It is
// best effort: the caller's context may be done, so it gets a short one of its own.
func (l *Limiter) refund(key string, rule Rule, n int64) {
	if n <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = l.store.Take(ctx, Request{Key: key, Rule: rule, N: -n})
}

// Check is one limit of a layered decision (see AllowAll).
type Check struct {
	Key  string
	Rule Rule
	// N is the cost; 0 means 1.
	N int64
	// Holdback, when positive, is what must remain after the check for it to admit (a
	// criticality class's holdback: Limiter.Holdback; see Request.Holdback).
	Holdback int64
	// Criticality is the request's class, passed to the store (Request.Criticality).
	Criticality Criticality
	// Decision is filled in by AllowAll.
	Decision Decision
}

// AllowAll admits a request only if every check admits it: for example a per-client business
// quota (on a shared store) plus a per-instance overload guard. When one check denies, the
// units already taken by earlier checks are refunded, so a denied request consumes from none;
// between the take and the refund a concurrent request may see the capacity as used (which
// can only deny it, never over-admit). Checks after the denying one are peeked, so every
// check's Decision is filled in.
//
// The returned Decision combines them: Allowed if all allowed; Limit and Remaining of the check
// with the least remaining; the longest RetryAfter among denials (Never if any is Never); the
// longest ResetAfter. An error leaves earlier takes refunded; it names the check by its index,
// never by its key, which may hold a request's value (an API key, an address) that errors must
// not carry into logs, traces and answers.
func (l *Limiter) AllowAll(ctx context.Context, checks []Check) (Decision, error) {
	if l.store == nil {
		return Decision{}, ErrNoStore
	}
	if len(checks) == 0 {
		return Decision{}, fieldError(ErrInvalidN, "checks", "empty")
	}
	if len(checks) == 1 && l.plain(checks[0].Holdback, checks[0].Criticality) { // AllowN: the memory store's fast path
		c := &checks[0]
		n := c.N
		if n == 0 {
			n = 1
		}
		d, err := l.AllowN(ctx, c.Key, c.Rule, n)
		if err != nil {
			return Decision{}, fmt.Errorf("check 0: %w", err) // never the key: it may hold an API key
		}
		c.Decision = d
		return d, nil
	}
	denied := -1
	for i := range checks {
		c := &checks[i]
		n := c.N
		if n == 0 {
			n = 1
		}
		if denied >= 0 {
			n = 0 // after a denial, only report
		}
		req := Request{Key: c.Key, Rule: c.Rule, N: n, Criticality: c.Criticality}
		if n > 0 {
			req.Holdback = c.Holdback
		}
		d, err := l.store.Take(ctx, req)
		if err != nil {
			l.undo(checks[:i], denied)
			return Decision{}, fmt.Errorf("check %d: %w", i, err)
		}
		c.Decision = d
		if !d.Allowed && denied < 0 {
			denied = i
			l.undo(checks[:i], -1)
		}
	}
	d, _ := Combine(checks, denied < 0)
	return d, nil
}

// WaitAll is AllowAll that waits instead of denying: while the checks deny with a RetryAfter
// that ends within maxWait (and the context's deadline), it sleeps that long on the
// limiter's clock and decides again. It returns the last decision: denied when the wait
// would be too long (RetryAfter then says how long), or the context's error when it ends
// while waiting. Unlike WaitN it schedules no slot, for any algorithm: under contention another
// request may take the slot first, and the waiter asks again.
func (l *Limiter) WaitAll(ctx context.Context, checks []Check, maxWait time.Duration) (Decision, error) {
	end := l.clock.Now().Add(maxWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	for {
		d, err := l.AllowAll(ctx, checks)
		if err != nil || d.Allowed || d.RetryAfter < 0 || d.RetryAfter > end.Sub(l.clock.Now()) {
			return d, err
		}
		if err := l.sleep(ctx, max(d.RetryAfter, time.Millisecond)); err != nil {
			return d, err
		}
	}
}

// undo refunds checks taken before a denial or an error.
func (l *Limiter) undo(taken []Check, denied int) {
	if denied >= 0 {
		return // already undone when the denial happened
	}
	for i := range taken {
		c := &taken[i]
		n := c.N
		if n == 0 {
			n = 1
		}
		l.refund(c.Key, c.Rule, n)
		c.Decision.Remaining = min(c.Decision.Capacity, c.Decision.Remaining+n)
	}
}

// Combine returns the decision of a layered request from its checks' decisions (see AllowAll),
// and the index of the binding check: the one with the least remaining, the first on a tie.
// allowed says whether the request was admitted (AllowAll: every check admitted it). The
// decision has the binding check's Limit and Remaining, the longest ResetAfter and, when not
// allowed, the longest RetryAfter of the checks that denied (Never if any is Never), else 0.
// With no checks it returns the zero Decision and -1.
func Combine(checks []Check, allowed bool) (Decision, int) {
	return combine(len(checks), func(i int) *Decision { return &checks[i].Decision }, allowed)
}

// combine is Combine over n decisions, the i-th at(i): Combine's checks, a Reservation's holds.
func combine(n int, at func(i int) *Decision, allowed bool) (Decision, int) {
	if n == 0 {
		return Decision{}, -1
	}
	out, binding := *at(0), 0
	out.Allowed = allowed
	out.RetryAfter = 0
	for i := range n {
		d := at(i)
		if d.Remaining < out.Remaining {
			out.Capacity, out.Remaining, binding = d.Capacity, d.Remaining, i
		}
		out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
		if !allowed && !d.Allowed && out.RetryAfter >= 0 {
			if d.RetryAfter < 0 {
				out.RetryAfter = Never
			} else {
				out.RetryAfter = max(out.RetryAfter, d.RetryAfter)
			}
		}
	}
	return out, binding
}
