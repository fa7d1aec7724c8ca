package distributed

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/shardmap"
	"github.com/sluicehq/sluice/store/memory"
)

// DefaultFallbackMaxKeys bounds the keys whose last store decision a Fallback remembers.
const DefaultFallbackMaxKeys = 100_000

// ledger is a Fallback's outage accounting: what FailLocal decides while the circuit is
// open, and what that owes the store. It remembers the last store decision on each key
// (remember) to start the key's local limiter from it, decides on the local limiter with this
// instance's share of the rule (fixed when the circuit opens: freeze), keeps the outage's own
// consumption on a shadow limiter, and writes it back to the store before decisions return to
// it (writeBack). It asks the breaker which outage it is in and whether the outage is written
// back, and the membership for the share. It is safe for concurrent use once built.
type ledger struct {
	next    sluice.Store
	clock   sluice.Clock
	timeout time.Duration
	stop    <-chan struct{} // closed by the Fallback's Close: a write in flight is abandoned
	breaker *breaker
	members *membership

	local  *memory.Store        // the local limiter
	shadow *memory.Store        // the outage's own consumption per key (decideLocal)
	seen   *shardmap.Map[*seen] // what is remembered of each key
	share  atomic.Uint64        // while open, the local share of each rule (float64 bits)
}

// open makes the local and shadow limiters, deciding on clock (nil: the memory store's own).
func (l *ledger) open(clock sluice.Clock) error {
	var opts []memory.Option
	if clock != nil {
		opts = append(opts, memory.WithClock(clock))
	}
	var err error
	if l.local, err = memory.New(opts...); err != nil {
		return err
	}
	l.shadow, err = memory.New(opts...)
	return err
}

// fraction is this instance's share of each rule while the store is down: fixed when the
// circuit opens for the whole outage (freeze: a probe's heartbeat, answered before the other
// instances are back, would count this one alone), else the membership's.
func (l *ledger) fraction() float64 {
	if fr := l.share.Load(); fr != 0 {
		return math.Float64frombits(fr)
	}
	return l.members.fraction()
}

// freeze fixes the share for the outage that starts; thaw lets it follow the count again.
func (l *ledger) freeze() { l.share.Store(math.Float64bits(l.fraction())) }

func (l *ledger) thaw() { l.share.Store(0) }

// close releases the local and shadow limiters.
func (l *ledger) close() error { return errors.Join(l.local.Close(), l.shadow.Close()) }

// seen is what a Fallback remembers of a key, so that neither switch hands out a fresh
// budget: the last store decision, where the local limiter starts the key when the circuit
// opens, and what the local limiter admitted during the outage, written back to the store
// before decisions return to it.
type seen struct {
	rule      sluice.Rule
	remaining int64  // the store's Remaining in the last decision
	until     int64  // clock instant (Unix ns) from which that decision no longer binds (its ResetAfter)
	outage    uint64 // the outage in which the local limiter was started from it (0: none yet)
	written   uint64 // the outage whose local admissions on it were last written back (0: none yet)
	held      int64  // a bucket: units of this instance's local level the store holds (its start, then what was written back)
	heldAt    int64  // clock instant (Unix ns) of held, from which the store refills it
	owed      int64  // local decisions that moved the outage's consumption since it was last written back
}

// seenRemaining lets a full shard drop first the keys whose last decision no longer binds,
// and never a key that owes the store its outage's consumption.
func seenRemaining(v *seen, now int64) int64 {
	if v.owed != 0 {
		return shardmap.Pinned
	}
	return v.until - now
}

// remember records a store decision on req's key.
func (l *ledger) remember(req *sluice.Request, d *sluice.Decision) {
	if req.N < 0 {
		return // a refund says nothing of the key's state that the next decision won't
	}
	now := l.clock.Now().UnixNano()
	sh := l.seen.Shard(req.Key)
	sh.Lock()
	v, ok := sh.Get(req.Key)
	if !ok {
		if d.Remaining >= d.Capacity || !sh.MakeRoom(now) {
			sh.Unlock() // a full key carries nothing; a shard of owing keys keeps them
			return
		}
		v = &seen{}
		sh.Set(strings.Clone(req.Key), v)
	}
	// outage 0: the next local decision starts the key from this decision, even one by
	// policy before the circuit opens (those belong to the outage number the last one left).
	v.rule, v.remaining, v.until, v.outage = req.Rule, d.Remaining, now+int64(d.ResetAfter), 0
	sh.Unlock()
}

// decideLocal decides req on the local limiter with this instance's share (fraction) of the
// rule. Once per outage it first starts the key from the last store decision: the local
// limiter then holds fraction of what the store had left, so the fleet admits no more during
// the outage than the store would have (refill between that decision and the outage is not
// credited: the key may be denied a little more than the store would). What it admits is
// owed to the store, and written back before decisions return to it (writeBack).
func (l *ledger) decideLocal(ctx context.Context, req sluice.Request, fraction float64) (sluice.Decision, error) {
	if err := req.Validate(0); err != nil {
		return sluice.Decision{}, err
	}
	local := req
	local.Rule = share(req.Rule, fraction)
	now := l.clock.Now().UnixNano()
	outage := l.breaker.outage.Load()
	sh := l.seen.Shard(req.Key)
	sh.Lock()
	defer sh.Unlock()
	v, ok := sh.Get(req.Key)
	if ok && v.outage != outage {
		v.outage, v.held, v.heldAt = outage, 0, now
		if v.until > now && v.rule == req.Rule {
			v.held = l.startLocal(ctx, local, int64(float64(v.remaining)*fraction))
		}
	}
	if ok && v.written == outage && req.Kind().Takes() && !algorithm.Drains(req.Rule) && l.breaker.recovering.Load() {
		// Written back, and back on the store at the next probe: an admission now would be
		// written in a second write-back (see writeBack), and a window algorithm's store would
		// count it with the first in one window, while the first's oldest units should have
		// left it: too many units in one window make the next one admit late and bunched. A
		// draining state's store refills what was written as time passes, and it writes its
		// level (localUsed), so it goes on deciding: denying it here would let the store
		// refill unused, a burst at the switch.
		return sluice.Decision{Capacity: local.Rule.Capacity(), RetryAfter: l.breaker.interval}, nil
	}
	d, err := l.local.Take(ctx, local)
	if err != nil || !d.Allowed || req.N == 0 {
		return d, err
	}
	if !ok {
		if !sh.MakeRoom(now) {
			return d, nil // every sampled entry owes: this admission is not written back
		}
		v = &seen{outage: outage}
		sh.Set(strings.Clone(req.Key), v)
	}
	v.rule = req.Rule
	v.owed++
	// The outage's own consumption, apart from where the key started: the same decision on a
	// shadow limiter that holds only the outage's admissions (a settle: never refused), so
	// what is written back decays as the algorithm decays it (refill, windows passing), not
	// the sum of every admission of a long outage.
	local.Settle, local.MaxDelay = true, 0
	_, _ = l.shadow.Take(ctx, local)
	return d, nil
}

// takeOwed returns what key's outage consumption still weighs on its rule now (the shadow
// limiter's capacity less its remaining, under this instance's share of rule: see
// decideLocal) and empties the shadow limiter's key, under the key's lock, so no admission
// falls between the two: what is written back is then all that was owed, and what a later
// write-back sends all that came after. (A refund of what it weighed would not do: the
// sliding window's estimate weighs the previous window's units by the part of it still
// inside the period, while a refund takes whole units from the newest window first, so the
// rest of the previous window would be written again.) giveBack puts it back if the write
// fails.
func (l *ledger) takeOwed(ctx context.Context, key string, rule sluice.Rule) (sluice.Rule, int64) {
	local := share(rule, l.fraction())
	sh := l.seen.Shard(key)
	sh.Lock()
	defer sh.Unlock()
	d, err := l.shadow.Take(ctx, sluice.Request{Key: key, Rule: local, N: 0})
	if err != nil || d.Remaining >= d.Capacity {
		return local, 0
	}
	_, _ = l.shadow.Take(ctx, sluice.Request{Key: key, Rule: local, N: -sluice.MaxLimit, Settle: true})
	return local, d.Capacity - d.Remaining
}

// giveBack puts owed units back on the shadow limiter's key after a write-back that failed.
func (l *ledger) giveBack(ctx context.Context, key string, local sluice.Rule, owed int64) {
	if owed > 0 {
		_, _ = l.shadow.Take(ctx, sluice.Request{Key: key, Rule: local, N: owed, Settle: true})
	}
}

// startLocal brings the local limiter's key down to at most remaining units (a take of the
// difference), leaving it alone when it already holds fewer, and returns what it took.
func (l *ledger) startLocal(ctx context.Context, req sluice.Request, remaining int64) int64 {
	req.N = 0
	d, err := l.local.Take(ctx, req)
	if err != nil || d.Remaining <= remaining {
		return 0
	}
	req.N = d.Remaining - remaining
	if d, err := l.local.Take(ctx, req); err != nil || !d.Allowed {
		return 0
	}
	return req.N
}

// writeBackWorkers is how many write-back calls a Fallback keeps in flight, so that a
// pipelining store batches them.
const writeBackWorkers = 64

// owing is one key's write-back.
type owing struct {
	key            string
	rule           sluice.Rule
	owed, consumed int64 // owed: seen.owed; consumed: what the store had consumed at the last decision
	until          int64
	level          bool  // a draining state started on the local limiter in this outage (localUsed)
	held, heldAt   int64 // seen.held, seen.heldAt
}

// writeBack hands the store, before decisions return to it, what it missed during the outage,
// as settles (charged whatever the limit, so nothing is lost to a denial): what each key's
// admissions on the local limiter still weigh (takeOwed: a long outage's early admissions
// have refilled or left their window by then; a bucket's, its local level less what the store
// still holds of it: localUsed); and, for a key the store has forgotten (it answered as
// full although the last decision said the key would not be full before now: a restart
// without persistence), what the store had consumed at that decision (refill since then not
// credited). A restart forgets every key, and the first instance to write a key back finds
// it full; the instances after it find it written. (Two instances writing the same
// forgotten key at the same instant both restore it: the key is then denied more, never
// admitted more.) Each call is bounded by the timeout. A key whose write fails keeps what it
// owes, and the error is returned: the circuit stays open, and the next probe tries again.
func (l *ledger) writeBack(ctx context.Context) error {
	now := l.clock.Now().UnixNano()
	outage := l.breaker.outage.Load()
	var todo []owing
	for i := range shardmap.Shards {
		sh := l.seen.At(i)
		sh.Lock()
		sh.Range(func(key string, v *seen) {
			if v.owed != 0 || v.until > now {
				todo = append(todo, owing{key: key, rule: v.rule, owed: v.owed, until: v.until,
					consumed: max(0, v.rule.Capacity()-v.remaining),
					level:    algorithm.Drains(v.rule) && v.outage == outage, held: v.held, heldAt: v.heldAt})
			}
		})
		sh.Unlock()
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan owing)
	)
	for range min(writeBackWorkers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range next {
				if err := l.writeKey(ctx, o, now); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, o := range todo {
		next <- o
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// writeKey writes one key back (see writeBack): a peek first, to tell whether the store
// forgot the key (it answers full before the last decision's until), then one settle of what
// the key owes plus, if it was forgotten, what the store had consumed. A settle that fails
// leaves both owed; one that timed out may have committed, and is then counted twice on the
// next probe (the key denied more, never admitted more).
func (l *ledger) writeKey(ctx context.Context, o owing, now int64) error {
	var forgotten int64
	if o.until > now && o.consumed > 0 {
		d, err := l.settle(ctx, o.key, o.rule, 0)
		if err != nil {
			return err
		}
		if d.Remaining >= o.rule.Capacity() {
			forgotten = o.consumed
		}
	}
	local, owed := l.takeOwed(ctx, o.key, o.rule)
	n, used := owed+forgotten, int64(-1)
	if o.level {
		used = l.localUsed(ctx, o.key, local)
		if forgotten == 0 {
			p := algorithm.Compile(local)
			n = max(n, used-p.Holds(o.held, o.heldAt, now))
		}
	}
	if n > 0 {
		if _, err := l.settle(ctx, o.key, o.rule, n); err != nil {
			l.giveBack(ctx, o.key, local, owed)
			return err
		}
	}
	l.paid(o.key, o.owed, n > 0, used, now)
	return nil
}

// localUsed is what key's local limiter holds consumed under local, this instance's share of
// the key's level on a bucket: it started from the store's last decision (startLocal) and was
// charged and refilled since. A bucket's key is written back as that less what the store
// already holds of it (seen.held, less what the store refilled since): the shadow limiter
// alone (takeOwed) would not do, since it starts full, so under a flood that the local limiter
// admits at the refill rate it refills as fast as it is charged and holds next to nothing,
// while the key is in truth empty; the store, restarted or refilled by then, would hand out a
// full burst.
func (l *ledger) localUsed(ctx context.Context, key string, local sluice.Rule) int64 {
	d, err := l.local.Take(ctx, sluice.Request{Key: key, Rule: local, N: 0})
	if err != nil {
		return 0
	}
	return d.Capacity - d.Remaining
}

// settle applies n to key on the store whatever the limit, bounded by the timeout.
func (l *ledger) settle(ctx context.Context, key string, rule sluice.Rule, n int64) (sluice.Decision, error) {
	req := sluice.Request{Key: key, Rule: rule, N: n, Settle: true}
	return within(ctx, l.timeout, l.stop, func(ctx context.Context) (sluice.Decision, error) {
		return l.next.Take(ctx, req)
	})
}

// paid takes the n local decisions now written back off key's count (see seen.owed) and,
// when written, marks the key written back in this outage (see decideLocal); a bucket's key
// (used >= 0) is then held by the store up to used, its local level, from now.
func (l *ledger) paid(key string, n int64, written bool, used, now int64) {
	sh := l.seen.Shard(key)
	sh.Lock()
	if v, ok := sh.Get(key); ok {
		v.owed -= n
		if written {
			v.written = l.breaker.outage.Load()
		}
		if used >= 0 {
			v.held, v.heldAt = used, now
		}
	}
	sh.Unlock()
}
