package algorithm

import "github.com/sluicehq/sluice"

// SlidingWindow approximates a sliding window with N sub-windows of Period/N (N =
// Rule.SubWindows, 1 by default) and one more counter for the sub-window that is sliding out:
// the estimate at time t is the sum of the N newest sub-windows plus the oldest one weighted
// by the part of it still inside (t-Period, t]. With N = 1 this is the classic two-window
// approximation (Cloudflare's). Memory: 8 x (N+1) + 16 bytes per key.
//
// It assumes the oldest sub-window's units were spread evenly over it, so under bursty traffic
// it can admit slightly more (or fewer) than Limit in a span of one period; the error shrinks
// as N grows. docs/ACCURACY.md has the measured figures.
//
// A rule change that keeps Period and SubWindows keeps the counters as they are; one that
// changes them carries the current estimate into the new current sub-window.
//
// The counters are exported for a caller that keeps them elsewhere: package distributed's
// Async copies its view of a store's counters into a SlidingWindow, decides with Take and
// takes the changes back, so both decide with this code.
type SlidingWindow struct {
	// Counts is a ring of N+1 counters: sub-window w's count is at w mod (N+1).
	Counts []int64
	// Newest is the index (Unix ns / Sub) of the newest sub-window counted.
	Newest int64
	// Sub is the sub-window length the counters were taken with, ns; 0 before the first
	// decision.
	Sub int64
}

// Algorithm returns sluice.AlgorithmSlidingWindow.
func (*SlidingWindow) Algorithm() sluice.Algorithm { return sluice.AlgorithmSlidingWindow }

func (s *SlidingWindow) slot(w int64) *int64 { return &s.Counts[s.index(w)] }

// index is the position of sub-window w's counter in the ring. It divides, so the loops over
// the ring take one index and step with next and prev instead.
func (s *SlidingWindow) index(w int64) int { return RingIndex(w, int64(len(s.Counts))) }

// next and prev are the ring positions after and before i.
func (s *SlidingWindow) next(i int) int {
	if i++; i == len(s.Counts) {
		return 0
	}
	return i
}

func (s *SlidingWindow) prev(i int) int {
	if i == 0 {
		return len(s.Counts) - 1
	}
	return i - 1
}

// advance moves the newest sub-window to now's, after it, zeroing the ones in between. It is
// too big to inline, which keeps slideTo small enough to be.
func (s *SlidingWindow) advance(now int64) {
	w := WindowIndex(now, s.Sub)
	for i, j := s.Newest+1, min(w, s.Newest+int64(len(s.Counts))); i <= j; i++ {
		*s.slot(i) = 0
	}
	s.Newest = w
}

// slideTo advances the newest sub-window to now's and returns the instant to decide at: now,
// or the start of the newest sub-window if the clock went back before it.
func (s *SlidingWindow) slideTo(now int64) int64 {
	if now >= (s.Newest+1)*s.Sub {
		s.advance(now)
	}
	return max(now, s.Newest*s.Sub)
}

// counts returns the counters' view at now, which must be within sub-window s.Newest:
// the sum of the N newest sub-windows, the oldest one's count, and now's offset into it.
func (s *SlidingWindow) counts(now int64) (recent, old, f int64) {
	i := s.index(s.Newest + 1) // the oldest sub-window, Newest-N, shares the ring with Newest+1
	old = s.Counts[i]
	for range len(s.Counts) - 1 {
		i = s.next(i)
		recent += s.Counts[i]
	}
	return recent, old, now - s.Newest*s.Sub
}

// estimate is the count at offset f into the newest sub-window: the N newest sub-windows'
// counts (recent) and the oldest one's (old) weighted by the part of it still inside the
// window, rounded up.
func (s *SlidingWindow) estimate(recent, old, f int64) int64 {
	return recent + mulDivCeil(old, s.Sub-f, s.Sub)
}

// Estimate returns the count at now (rounded up) and the instant it was taken at: now, or
// the start of the newest sub-window if the clock went back before it. It advances the newest
// sub-window to now's. A change of period or sub-window count carries the estimate into the
// new current sub-window. The zero SlidingWindow counts nothing.
func (s *SlidingWindow) Estimate(now int64) (count, at int64) {
	if s.Sub <= 0 || len(s.Counts) == 0 {
		return 0, now
	}
	at = s.slideTo(now)
	return s.estimate(s.counts(at)), at
}

// reshape starts counters for a new period or sub-window count, carrying the current
// estimate (rounded up) into the new current sub-window.
func (s *SlidingWindow) reshape(now, windows, sub int64) int64 {
	carried, now := s.Estimate(now)
	s.Counts = make([]int64, windows+1)
	s.Sub = sub
	s.Newest = WindowIndex(now, sub)
	*s.slot(s.Newest) = carried
	return now
}

// Take implements State.
func (s *SlidingWindow) Take(now int64, pr *Params, n, _ int64) sluice.Decision {
	if int64(len(s.Counts)) != pr.windows+1 || s.Sub != pr.sub {
		now = s.reshape(now, pr.windows, pr.sub)
	}
	now = s.slideTo(now)
	recent, old, f := s.counts(now)
	used := s.estimate(recent, old, f)
	limit := pr.Rule.Limit
	d := sluice.Decision{Capacity: limit}
	switch {
	case n > limit:
		return never(limit, max(0, limit-used), s.resetAfter(now))
	case n < 0:
		s.refund(-n)
		d.Allowed = true
		used = s.estimate(s.counts(now))
	case used+n <= limit:
		*s.slot(s.Newest) += n
		used += n
		d.Allowed = true
	default:
		d.RetryAfter = dur(s.retryAfter(now, limit-n, recent, old, f))
	}
	d.Remaining = max(0, limit-used)
	d.ResetAfter = dur(s.resetAfter(now))
	return d
}

// Settle implements State: a debt is a count above the limit in the newest sub-window, which
// weighs on the estimate, as every count does, until it has slid out of the window.
func (s *SlidingWindow) Settle(now int64, pr *Params, n int64) sluice.Decision {
	return settle(s, now, pr, n)
}

// charge counts n more units in the newest sub-window, up to an estimate of Limit + MaxDebt.
func (s *SlidingWindow) charge(now int64, pr *Params, n int64) {
	used, _ := s.Estimate(now)
	*s.slot(s.Newest) += max(0, min(n, pr.Rule.Limit+pr.maxDebt-used))
}

// refund takes units back from the newest sub-windows first.
func (s *SlidingWindow) refund(n int64) {
	for j := s.Newest; j > s.Newest-int64(len(s.Counts)) && n > 0; j-- {
		c := s.slot(j)
		take := min(*c, n)
		*c -= take
		n -= take
	}
}

// retryAfter finds the earliest instant from now at which the estimate is at most need, if
// nothing else is admitted. recent, old and f0 are the estimate at now (see counts).
func (s *SlidingWindow) retryAfter(now, need, recent, old, f0 int64) int64 {
	n, sub, cur := int64(len(s.Counts))-1, s.Sub, s.Newest
	for k := int64(0); k <= n+1; k++ {
		wk := cur + k
		if recent <= need {
			// recent + ceil(old*(sub-f)/sub) <= need  <=>  f >= sub - floor((need-recent)*sub/old)
			var f int64
			if old > 0 {
				f = max(0, sub-mulDiv(need-recent, sub, old))
			}
			if k == 0 {
				f = max(f, f0)
			}
			if f < sub {
				return wk*sub + f - now
			}
		}
		// Step to sub-window wk+1: sub-window wk-n+1 slides out and becomes the oldest.
		var leaving int64
		if j := wk - n + 1; j <= cur {
			leaving = *s.slot(j)
		}
		recent -= leaving
		old = leaving
	}
	return (cur+n+1)*sub - now // unreachable for need >= 0
}

// resetAfter is how long until every counted unit has slid out of the window.
func (s *SlidingWindow) resetAfter(now int64) int64 {
	n := int64(len(s.Counts)) - 1
	for i, j := s.index(s.Newest), s.Newest; j >= s.Newest-n; i, j = s.prev(i), j-1 {
		if s.Counts[i] != 0 {
			return (j+n+1)*s.Sub - now
		}
	}
	return 0
}

// Clone returns a deep copy of the state.
func (s *SlidingWindow) Clone() State {
	c := *s
	c.Counts = append([]int64(nil), s.Counts...)
	return &c
}
