package hotkey

import (
	"context"

	"github.com/sluicehq/sluice"
)

// Charge settles on l what a hot key owes before the store decides it: v.Charge units of
// key under p's rule, the cold admissions not yet charged (nothing when v.Charge is 0). v is
// the Observation of Observe for key.
//
// Observe, Charge and Denied are the hot-key protocol's three steps for one key; a transport
// that decides a request's checks together uses them through a Batch.
func (p *Param) Charge(ctx context.Context, l *sluice.Limiter, key string, v Observation) error {
	if v.Charge <= 0 {
		return nil
	}
	_, err := l.Settle(ctx, key, p.rule, v.Charge)
	return err
}

// Denied records that the store denied a request of value (as observed): the sketch's Top
// reports it in DeniedRate.
func (p *Param) Denied(value string) { p.tracker.Denied(value) }

// Batch is the hot-key protocol of one request whose checks a transport decides together
// (sluice.Limiter.AllowAll): Observe each hot check's key while building the checks, leaving
// out those admitted cold; AllowAll then charges the store with the cold admissions of the
// keys that turned hot, decides, and tells the sketches which hot keys the store denied. A
// transport that decides otherwise (WaitAll, a fallback limiter) calls Charge and Record
// around its own decision.
//
// The zero Batch is ready; Reset empties it for the next request, keeping its memory. A Batch
// is not safe for concurrent use: it belongs to one request.
type Batch struct {
	hot []hotCheck
}

// hotCheck is a check whose key is hot: its sketch, its index in the request's checks and
// what it owes the store. (Not its key, which the check holds: keeping it would make every
// observed key escape to the heap, an allocation per request even for cold keys.)
type hotCheck struct {
	param  *Param
	index  int
	charge int64
}

// Observe counts n units of key on p for the request's check that will be checks[index]
// (with key as its Key), and returns p's Observation. When it is Cold, the check is admitted without a store call and the
// caller leaves it out of the checks; otherwise the batch keeps it to charge and record.
func (b *Batch) Observe(p *Param, index int, key string, n int64) Observation {
	v := p.Observe(key, n)
	if !v.Cold {
		b.hot = append(b.hot, hotCheck{param: p, index: index, charge: v.Charge})
	}
	return v
}

// Len returns the number of hot checks observed since the last Reset.
func (b *Batch) Len() int { return len(b.hot) }

// Charge settles on l the cold admissions the hot checks owe, before l decides checks.
func (b *Batch) Charge(ctx context.Context, l *sluice.Limiter, checks []sluice.Check) error {
	for _, h := range b.hot {
		if err := h.param.Charge(ctx, l, checks[h.index].Key, Observation{Charge: h.charge}); err != nil {
			return err
		}
	}
	return nil
}

// Record tells the sketches which hot checks the store denied (checks decided).
func (b *Batch) Record(checks []sluice.Check) {
	for _, h := range b.hot {
		if !checks[h.index].Decision.Allowed {
			h.param.Denied(checks[h.index].Key)
		}
	}
}

// AllowAll decides checks on l (sluice.Limiter.AllowAll), first charging the cold admissions
// of the hot checks, then recording which of them the store denied. With no hot check it is
// l.AllowAll.
func (b *Batch) AllowAll(ctx context.Context, l *sluice.Limiter, checks []sluice.Check) (sluice.Decision, error) {
	if len(b.hot) == 0 {
		return l.AllowAll(ctx, checks)
	}
	if err := b.Charge(ctx, l, checks); err != nil {
		return sluice.Decision{}, err
	}
	d, err := l.AllowAll(ctx, checks)
	if err == nil {
		b.Record(checks)
	}
	return d, err
}

// Reset empties the batch for another request.
func (b *Batch) Reset() {
	clear(b.hot) // drop the sketches
	b.hot = b.hot[:0]
}
