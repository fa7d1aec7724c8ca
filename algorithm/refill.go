package algorithm

import "github.com/sluicehq/sluice"

// Drains reports whether the states of rule r's algorithm hold a level that drains
// continuously at Limit units per Period (token bucket, leaky bucket, GCRA): of the units such
// a state holds consumed at t0, it still holds at t1 what Params.Holds says. The window
// algorithms and the sliding log count units that leave all at once instead, when their
// window passes or their timestamp leaves the period.
func Drains(r sluice.Rule) bool { return r.Algorithm.Bucket() }

// Refilled returns how many whole units p's rule refills from t0 to t1 (Unix ns) at its rate
// of Limit per Period: floor(Limit x (t1-t0) / Period), computed exactly with the fixed-point
// rate the buckets drain at; 0 when t1 <= t0 (a clock that went back refills nothing). GCRA,
// which emits one unit per Interval rounded up, refills at most 0.1% less.
func (p *Params) Refilled(t0, t1 int64) int64 {
	if t1 <= t0 || p.fillPS <= 0 {
		return 0
	}
	return p.fill.floor(t1-t0) / Scale
}

// Holds returns how many of the held units a draining state of p (see Drains) held consumed
// at t0 it still holds at t1: held less what the rule refilled in between (Refilled), at
// least 0. A token bucket charged held units at t0 reports Capacity - Holds remaining at t1.
func (p *Params) Holds(held, t0, t1 int64) int64 { return max(0, held-p.Refilled(t0, t1)) }
