package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/inflight"
)

// Answer is what a transport answers a decided Request with.
type Answer uint8

const (
	// Pass runs the request: its limits admitted it (it holds its slots until Finish), or the
	// store failed and the failure policy lets it through.
	Pass Answer = iota
	// Deny answers a rate limit's denial (429, ResourceExhausted): Checks say which.
	Deny
	// Refuse answers an in-flight limit's refusal (429, or 503 for an adaptive limit):
	// Refused says which.
	Refuse
	// Unavailable answers a store failure under FailClosed (503, Unavailable).
	Unavailable
	// Invalid answers a key the store refused (too long: 400, InvalidArgument); Outcome.Err
	// is the store's *sluice.FieldError.
	Invalid
	// Canceled answers a request whose own context ended before it was decided; Outcome.Err
	// is the context's error.
	Canceled
)

// Outcome is a decided Request's answer.
type Outcome struct {
	Answer Answer
	// Decided reports that the rate limits were decided: Decision and the checks' decisions
	// hold the answer's rate-limit state.
	Decided bool
	// Decision combines the checks' decisions (sluice.Combine).
	Decision sluice.Decision
	// Err is the cause of Invalid and Canceled; with Deny, the context's error when the
	// request's context ended the wait for its slot (a transport that shapes).
	Err error
}

// Decide decides q: its rate limits together (hot keys first), then, when they admit it and
// wait is positive, a wait for the slot of at most wait (never past ctx), then its in-flight
// claims. It counts the outcome (Stats) and returns it.
//
// A store error, at any step, goes through one failure handler, with one semantics whatever
// the transport:
//
//   - the request's own context ended (its error is ctx's): Canceled, nothing counted;
//   - the store refused a key (sluice.ErrInvalidKey: a client's value too long to key by):
//     Invalid, counted in BadInput and logged (Warn) without the key; never let through, as a
//     key a client makes too long must not turn a limit off;
//   - any other failure: counted in StoreErrors, logged (Warn, at most once a second, without
//     the key) and answered by the failure policy: FailOpen lets the request through without
//     the limits (FailedOpen), FailClosed answers Unavailable (FailedClosed), FailLocal decides
//     again with the local limiter (Config.Local) and a Leases on its store, and lets the request through
//     (FailedOpen) if that fails too.
func (q *Request) Decide(ctx context.Context, wait time.Duration) (o Outcome) {
	p := q.p
	q.cutKeys()
	if len(q.checks) > 0 {
		q.charged = p.cfg.Limiter
		d, err := q.hot.AllowAll(ctx, q.charged, q.checks)
		if err != nil {
			if v, e, local := q.fail(ctx, err, -1); !local {
				q.charged = nil // nothing was charged: nothing to settle
				return Outcome{Answer: v, Err: e}
			}
			q.charged = p.cfg.Local
			if d, err = q.hot.AllowAll(ctx, q.charged, q.checks); err != nil {
				if s := p.stats; s != nil {
					s.FailedOpen.Add(1)
				}
				q.charged = nil
				return Outcome{Answer: Pass}
			}
		}
		if !d.Allowed && wait > 0 {
			// Shaping: wait for the slot, bounded by wait and the request's context.
			wd, err := q.charged.WaitAll(ctx, q.checks, wait)
			switch {
			case err != nil && ctx.Err() != nil:
				o.Err = ctx.Err() // denied, and then the context ended the wait
			case err == nil && wd.Allowed:
				d = wd
				if s := p.stats; s != nil {
					s.Waited.Add(1)
				}
			}
		}
		o.Decided, o.Decision = true, d
		if !d.Allowed {
			if s := p.stats; s != nil {
				s.Denied.Add(1)
			}
			o.Answer = Deny
			return o
		}
	}
	if len(q.holds) > 0 {
		if v, done := q.decideBudgets(ctx, &o); done {
			o.Answer = v
			return o
		}
	}
	if len(q.claims) > 0 {
		if v, err, done := q.acquire(ctx); done {
			q.cancelBudgets(ctx)
			o.Answer, o.Err = v, err
			return o
		}
	}
	if s := p.stats; s != nil {
		s.Allowed.Add(1)
	}
	return o
}

// acquire takes a slot of each of q's claims; done reports a final answer (a refusal, or a
// failure the policy answers without running the request). A request the policy lets through
// runs without slots.
func (q *Request) acquire(ctx context.Context) (v Answer, cause error, done bool) {
	p := q.p
	i, err := inflight.Acquire(ctx, p.leases, q.claims)
	if err != nil {
		q.refused = i
		v, cause, local := q.fail(ctx, err, i)
		switch {
		case !local && v != Pass:
			return v, cause, true
		case !local: // failed open
			q.refused = -1
			return Pass, nil, false
		}
		if i, err = inflight.Acquire(ctx, p.localLeases, q.claims); err != nil {
			if s := p.stats; s != nil {
				s.FailedOpen.Add(1)
			}
			q.refused = -1
			return Pass, nil, false
		}
	}
	if i >= 0 {
		q.refused = i
		if s := p.stats; s != nil {
			s.Denied.Add(1)
		}
		return Refuse, nil, true
	}
	q.refused, q.held, q.since = -1, true, p.cfg.Clock.Now()
	return Pass, nil, false
}

// fail is the failure handler (see Decide) for err, of the rate decision (claim -1) or of
// claim: the answer and its cause, or local when FailLocal decides again on the local limiter.
func (q *Request) fail(ctx context.Context, err error, claim int) (v Answer, cause error, local bool) {
	p := q.p
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return Canceled, ctx.Err(), false
	}
	if fe := (*sluice.FieldError)(nil); errors.As(err, &fe) && errors.Is(err, sluice.ErrInvalidKey) {
		if s := p.stats; s != nil {
			s.BadInput.Add(1)
		}
		p.inputLog.Log(ctx, p.cfg.Log, p.cfg.Clock.Now(), levelInput, p.cfg.Name+": the store refused a key built from the request; the request is refused",
			slog.String("field", fe.Field), slog.String("reason", fe.Reason))
		return Invalid, fe, false
	}
	if s := p.stats; s != nil {
		s.StoreErrors.Add(1)
	}
	if claim < 0 {
		err = withoutKey(err)
	}
	p.warn(&p.storeLog, p.cfg.Name+": the store could not decide; applying the failure policy",
		slog.String("failure", p.cfg.Failure.String()), slog.String("err", err.Error()))
	switch p.cfg.Failure {
	case distributed.FailClosed:
		if s := p.stats; s != nil {
			s.FailedClosed.Add(1)
		}
		q.refused = claim
		return Unavailable, nil, false
	case distributed.FailLocal:
		return Pass, nil, true
	}
	if s := p.stats; s != nil {
		s.FailedOpen.Add(1)
	}
	return Pass, nil, false
}

// withoutKey returns err without sluice.Limiter.AllowAll's wrapping, "check i: " (AllowAll
// names the check by its index, never by its key, which may hold a client's API key).
func withoutKey(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// Unavailable returns the names of the limits a failed request could not decide: the claim's
// whose acquire failed, else every check's.
func (q *Request) Unavailable() []string {
	if c := q.Refused(); c != nil {
		return []string{c.Name}
	}
	names := make([]string, len(q.which))
	for i, l := range q.which {
		names[i] = q.p.limits[l].Name
	}
	return names
}

// Finish commits the budget reservations still open at what they hold (a cost nobody
// reported: the estimate stands) and gives back the slots q holds, telling each adaptive
// limit the request's round trip since it took them. It is safe on a request that holds
// none, and more than once.
func (q *Request) Finish() {
	if q.reserved {
		q.commitHeld(context.Background())
		q.reserved = false
	}
	if !q.held {
		return
	}
	q.held = false
	inflight.Release(q.claims, q.p.cfg.Clock.Now().Sub(q.since))
}
