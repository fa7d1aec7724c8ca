package distributed

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/shardmap"
)

// DefaultFallbackMaxKeys bounds the keys whose last store decision a Fallback remembers.
const DefaultFallbackMaxKeys = 100_000

// seen is what a Fallback remembers of a key, so that neither switch hands out a fresh
// budget: the last store decision, where the local limiter starts the key when the circuit
// opens, and what the local limiter admitted during the outage, written back to the store
// before decisions return to it.
type seen struct {
	rule      sluice.Rule
	remaining int64  // the store's Remaining in the last decision
	until     int64  // clock instant (Unix ns) from which that decision no longer binds (its ResetAfter)
	outage    uint64 // the outage in which the local limiter was started from it (0: none yet)
	owed      int64  // admitted locally during the current outage, not yet written back
}

// seenRemaining lets a full shard drop first the keys whose last decision no longer binds,
// and never a key that owes the store its outage's consumption.
func seenRemaining(v *seen, now int64) int64 {
	if v.owed > 0 {
		return shardmap.Pinned
	}
	return v.until - now
}

// remember records a store decision on req's key.
func (f *Fallback) remember(req *sluice.Request, d *sluice.Decision) {
	if req.N < 0 {
		return // a refund says nothing of the key's state that the next decision won't
	}
	now := f.clock.Now().UnixNano()
	sh := f.seen.Shard(req.Key)
	sh.Lock()
	v, ok := sh.Get(req.Key)
	if !ok {
		if d.Remaining >= d.Limit || !sh.MakeRoom(now) {
			sh.Unlock() // a full key carries nothing; a shard of owing keys keeps them
			return
		}
		v = &seen{}
		sh.Set(strings.Clone(req.Key), v)
	}
	v.rule, v.remaining, v.until = req.Rule, d.Remaining, now+int64(d.ResetAfter)
	sh.Unlock()
}

// decideLocal decides req on the local limiter with this instance's share (fraction) of the
// rule. Once per outage it first starts the key from the last store decision: the local
// limiter then holds fraction of what the store had left, so the fleet admits no more during
// the outage than the store would have (refill between that decision and the outage is not
// credited: the key may be denied a little more than the store would). What it admits is
// owed to the store, and written back before decisions return to it (writeBack).
func (f *Fallback) decideLocal(ctx context.Context, req sluice.Request, fraction float64) (sluice.Decision, error) {
	if err := req.Validate(0); err != nil {
		return sluice.Decision{}, err
	}
	local := req
	local.Rule = share(req.Rule, fraction)
	now := f.clock.Now().UnixNano()
	outage := f.outage.Load()
	sh := f.seen.Shard(req.Key)
	sh.Lock()
	defer sh.Unlock()
	v, ok := sh.Get(req.Key)
	if ok && v.outage != outage {
		v.outage = outage
		if v.until > now && v.rule == req.Rule {
			f.startLocal(ctx, local, int64(float64(v.remaining)*fraction))
		}
	}
	d, err := f.local.Take(ctx, local)
	if err != nil || !d.Allowed || req.N <= 0 {
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
	v.owed += req.N
	return d, nil
}

// startLocal brings the local limiter's key down to at most remaining units (a take of the
// difference), leaving it alone when it already holds fewer.
func (f *Fallback) startLocal(ctx context.Context, req sluice.Request, remaining int64) {
	req.N = 0
	d, err := f.local.Take(ctx, req)
	if err != nil || d.Remaining <= remaining {
		return
	}
	req.N = d.Remaining - remaining
	_, _ = f.local.Take(ctx, req)
}
