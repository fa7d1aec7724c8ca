package algorithm

import "github.com/sluicehq/sluice"

// TakeReserved decides n > 0 units that may be admitted only if reserve >= 0 units remain
// after them (sluice.Request.Reserve, the reserve of a criticality class), for every
// algorithm at once: it takes n + reserve, and when they are admitted gives reserve back at
// once, so the state moves exactly as Take(n) would and a denied request consumes nothing.
// RetryAfter is when n + reserve fit (Never when they exceed the capacity); Remaining is what
// is left above the reserve; ResetAfter is the state's after the give-back. The Redis scripts
// do the same in one call (store/redis/lua/reserve.lua).
func TakeReserved(s State, now int64, p *Params, n, reserve int64) sluice.Decision {
	if reserve <= 0 {
		return s.Take(now, p, n, 0)
	}
	d := s.Take(now, p, n+reserve, 0)
	if d.Allowed {
		back := s.Take(now, p, -reserve, 0)
		d.Remaining, d.ResetAfter = back.Remaining, back.ResetAfter
	}
	d.Remaining = max(0, d.Remaining-reserve)
	return d
}
