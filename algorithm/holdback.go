package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// TakeHoldback decides n > 0 units that may be admitted only if holdback >= 0 units remain
// after them (sluice.Request.Holdback, the holdback of a criticality class), for every
// algorithm at once: it takes n + held, and when they are admitted gives held back at once,
// so the state moves exactly as Take(n) would and a denied request consumes nothing.
//
// held is the holdback, except in a fixed window (see paced), whose whole capacity returns at
// once when a window starts: there a class may use only its share (capacity - holdback) of
// what the window has let through so far, the share paced by the part of the window begun,
// so the classes below the top cannot spend their ceilings in the window's first moments and
// leave nothing for the classes above them later in the window. The other algorithms return
// capacity gradually and hold the holdback as it is.
//
// RetryAfter is when n + held fit (Never when n + holdback exceed the capacity; in a fixed
// window, the instant the paced share covers the request, in this window or the next);
// Remaining is what is left above held; ResetAfter is the state's after the give-back. The
// Redis scripts do the same in one call (store/redis/lua/holdback.lua).
func TakeHoldback(s State, now int64, p *Params, n, holdback int64) sluice.Decision {
	if holdback <= 0 {
		return s.Take(now, p, n, 0)
	}
	held, share := holdback, int64(0)
	if p.Rule.Algorithm == sluice.AlgorithmFixedWindow && holdback < p.capacity {
		share = p.capacity - holdback
		held = p.capacity - paced(now, p.period, share)
	}
	d := s.Take(now, p, n+held, 0)
	if d.Allowed {
		back := s.Take(now, p, -held, 0)
		d.Remaining, d.ResetAfter = back.Remaining, back.ResetAfter
	} else if n <= share { // share is 0 unless paced
		d.RetryAfter = dur(paceRetry(now, p.period, share, p.capacity-d.Remaining, n))
	}
	d.Remaining = max(0, d.Remaining-held)
	return d
}

// paceUnit is the step of the pace: a window's paced share grows once per millisecond, which
// the Redis scripts, whose clock is in milliseconds, compute alike.
const paceUnit = int64(time.Millisecond)

// paceLeadParts sets the lead of the pace, a 1/paceLeadParts of the window: a class may use
// its share of what the window will have let through a sixteenth of a window from now, so the
// jitter of arrivals early in a window does not refuse the classes just below the top
// (CRITICAL 0.976 instead of 0.940 in `sluice simulate -scenario criticality`).
const paceLeadParts = 16

// paced returns how much of share a fixed window of length period (ns) lets a class use at
// now (Unix ns): share x begun / period, rounded down, where begun is the part of the window
// (epoch-aligned) begun by now, in whole milliseconds counting the current one, plus the lead
// (period / paceLeadParts, in whole milliseconds), at most the window. So it grows from about
// share / paceLeadParts at the window's start to share a sixteenth of a window before its end.
func paced(now, period, share int64) int64 {
	elapsed := now - WindowIndex(now, period)*period
	return mulDiv(share, min(period, (elapsed/paceUnit+1)*paceUnit+paceLead(period)), period)
}

// paceLead is the lead of the pace in a window of length period: period / paceLeadParts, rounded
// down to whole milliseconds.
func paceLead(period int64) int64 { return period / paceLeadParts / paceUnit * paceUnit }

// paceRetry is how long from now until a fixed window that has counted count units lets a
// class with share take n more (0 < n <= share): the first millisecond at which the paced
// share covers count + n, in this window if they fit the share, else in the next, whose count
// starts from 0.
func paceRetry(now, period, share, count, n int64) int64 {
	start, need := WindowIndex(now, period)*period, count+n
	if need > share {
		start, need = start+period, n
	}
	// the first millisecond k with share x ((k+1) ms + lead) / period >= need
	k := max(0, mulDivCeil(need, period, share*paceUnit)-paceLead(period)/paceUnit-1)
	return start + k*paceUnit - now
}
