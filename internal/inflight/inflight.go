// Package inflight is the in-flight step of every transport's limit pipeline (httplimit,
// grpclimit, sluice proxy): once a request's rate limits admit it, it takes a slot of each
// of its in-flight limits (sluice.Leases.Acquire), all or none, holds them while it runs
// and gives them back when it ends, telling each adaptive limit the request's round trip.
// The transports pass their claims as data; the deciding, the releasing and the mapping of a
// refusal to a denial live here once.
package inflight

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

// Claim is one in-flight limit a request must hold a slot of. The transport fills in the
// fields up to Class; Acquire fills in Slot.
type Claim struct {
	// Name names the limit to clients (the violated policy of a denial).
	Name string
	// Key is the store key the slots are counted under.
	Key string
	// InFlight is the limit and its lease; with Adaptive, InFlight.Limit is replaced by the
	// adaptive limit in force at each acquire.
	InFlight sluice.InFlight
	// Adaptive, when set, is the limit in force, told each request's round trip on Release.
	Adaptive *adaptive.Gradient
	// Classed decides the claim for criticality class Class (sluice.Leases.AcquireClass):
	// the class cannot take the slots the classes above it keep.
	Classed bool
	Class   sluice.Criticality
	// Slot is the outcome of the acquire.
	Slot sluice.Slot
}

// limit returns the limit in force for the next acquire.
func (c *Claim) limit() sluice.InFlight {
	f := c.InFlight
	if c.Adaptive != nil {
		f.Limit = int64(c.Adaptive.Limit())
	}
	return f
}

// Acquire takes a slot of every claim, in order, on ls, and returns -1 when every claim holds
// one. When a claim is refused, or the store fails, the slots already taken are given back:
// it returns the refused claim's index (its Slot says why), or the failing one's with the
// error. A request then holds nothing.
func Acquire(ctx context.Context, ls *sluice.Leases, claims []Claim) (int, error) {
	for i := range claims {
		c := &claims[i]
		var err error
		if c.Classed {
			c.Slot, err = ls.AcquireClass(ctx, c.Key, c.limit(), c.Class)
		} else {
			c.Slot, err = ls.Acquire(ctx, c.Key, c.limit())
		}
		if err != nil || !c.Slot.Admitted {
			giveBack(claims[:i])
			return i, err
		}
	}
	return -1, nil
}

// Release gives back every slot the claims hold and tells each adaptive limit that the
// request took rtt. It is safe to call on claims Acquire refused (nothing is held) and more
// than once (a slot is released once). A release the store could not take is left to the
// lease's expiry.
func Release(claims []Claim, rtt time.Duration) {
	for i := range claims {
		c := &claims[i]
		if !c.Slot.Admitted {
			continue
		}
		if c.Adaptive != nil {
			c.Adaptive.Observe(rtt, int(min(c.Slot.InFlight, 1<<30)))
		}
		_ = c.Slot.Release()
		c.Slot = sluice.Slot{}
	}
}

// giveBack releases slots taken for a request that is not admitted after all: no round trip
// to report.
func giveBack(claims []Claim) {
	for i := range claims {
		_ = claims[i].Slot.Release()
		claims[i].Slot = sluice.Slot{}
	}
}

// Overload reports whether the refusal of c is the server's overload (an adaptive limit:
// answer 503, temporary reduced capacity) rather than a client over its quota (429).
func (c *Claim) Overload() bool { return c.Adaptive != nil }

// MaxRetry caps the Retry-After of a refusal: the store's hint is when the soonest lease
// would expire unrenewed, but a slot usually frees as soon as a request ends.
const MaxRetry = time.Second

// Decision returns c's outcome as a rate decision, for the transports' headers and denials:
// Allowed when a slot was taken; when refused, RetryAfter is the store's hint capped at
// MaxRetry (sluice.Never stays: the class can never be admitted).
func (c *Claim) Decision() sluice.Decision {
	s := c.Slot.LeaseDecision
	d := sluice.Decision{Allowed: s.Admitted, Capacity: s.Capacity, Remaining: s.Remaining}
	if !s.Admitted {
		d.RetryAfter = s.RetryAfter
		if d.RetryAfter >= 0 {
			d.RetryAfter = min(max(d.RetryAfter, time.Millisecond), MaxRetry)
		}
	}
	return d
}

// Validate checks a transport's in-flight limit f with its adaptive limit a (nil: fixed) and
// whether the limit is also a hot parameter, naming the field at fault in a
// *sluice.FieldError: "adaptive" without f, "hot" with f, else f's own ("max_in_flight",
// "lease"; with a, f.Limit is not used and may be 0). Nil f and a are valid: no in-flight
// limit.
func Validate(f *sluice.InFlight, a *adaptive.Gradient, hot bool) error {
	switch {
	case f == nil && a != nil:
		return &sluice.FieldError{Field: "adaptive", Reason: "set without InFlight (which gives its lease)", Err: sluice.ErrInvalidRule}
	case f == nil:
		return nil
	case hot:
		return &sluice.FieldError{Field: "hot", Reason: "a hot parameter cannot have an in-flight limit", Err: sluice.ErrInvalidRule}
	}
	v := *f
	if a != nil {
		v.Limit = 1 // the adaptive limit is in force; f gives the lease
	}
	return v.Validate()
}

// Leases reports whether st keeps leases (sluice.Leaser), which in-flight limits need.
func Leases(st sluice.Store) bool {
	_, ok := st.(sluice.Leaser)
	return ok
}
