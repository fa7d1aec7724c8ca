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
type SlidingWindow struct {
	counts []int64 // ring of N+1 counters; sub-window w lives at w mod (N+1)
	cur    int64   // index (time / sub) of the newest sub-window counted
	sub    int64   // sub-window length the counters were taken with, ns
}

// Algorithm returns sluice.AlgorithmSlidingWindow.
func (*SlidingWindow) Algorithm() sluice.Algorithm { return sluice.AlgorithmSlidingWindow }

func (s *SlidingWindow) slot(w int64) *int64 {
	i := w % int64(len(s.counts))
	if i < 0 {
		i += int64(len(s.counts))
	}
	return &s.counts[i]
}

// advance moves the newest sub-window to w, zeroing the ones in between.
func (s *SlidingWindow) advance(w int64) {
	if w <= s.cur {
		return
	}
	for i, j := s.cur+1, min(w, s.cur+int64(len(s.counts))); i <= j; i++ {
		*s.slot(i) = 0
	}
	s.cur = w
}

// estimate returns the counters' view at now, which must be within sub-window s.cur:
// the sum of the N newest sub-windows, the oldest one's count, and now's offset into s.cur.
func (s *SlidingWindow) estimate(now int64) (recent, old, f int64) {
	n := int64(len(s.counts)) - 1
	for j := s.cur - n + 1; j <= s.cur; j++ {
		recent += *s.slot(j)
	}
	return recent, *s.slot(s.cur - n), now - s.cur*s.sub
}

// reshape starts counters for a new period or sub-window count, carrying the current
// estimate (rounded up) into the new current sub-window.
func (s *SlidingWindow) reshape(now, windows, sub int64) int64 {
	var carried int64
	if s.sub != 0 {
		w := floorDiv(now, s.sub)
		if w < s.cur {
			w, now = s.cur, s.cur*s.sub
		}
		s.advance(w)
		recent, old, f := s.estimate(now)
		carried = SlidingEstimate(recent, old, f, s.sub)
	}
	s.counts = make([]int64, windows+1)
	s.sub = sub
	s.cur = floorDiv(now, sub)
	*s.slot(s.cur) = carried
	return now
}

// Take implements State.
func (s *SlidingWindow) Take(now int64, pr *Params, n, _ int64) sluice.Decision {
	windows, sub := pr.windows, pr.sub
	if int64(len(s.counts)) != windows+1 || s.sub != sub {
		now = s.reshape(now, windows, sub)
	}
	w := s.cur
	if start := s.cur * sub; now < start { // the clock went backwards: stand at the start of the newest sub-window
		now = start
	} else if now >= start+sub {
		w = floorDiv(now, sub)
		s.advance(w)
	}
	recent, old, f := s.estimate(now)
	used := SlidingEstimate(recent, old, f, sub)
	limit := pr.Rule.Limit
	d := sluice.Decision{Limit: limit}
	switch {
	case n > limit:
		return never(limit, max(0, limit-used), s.resetAfter(now))
	case n < 0:
		s.refund(-n)
		d.Allowed = true
		recent, old, f = s.estimate(now)
		used = SlidingEstimate(recent, old, f, sub)
	case used+n <= limit:
		*s.slot(w) += n
		used += n
		d.Allowed = true
	default:
		d.RetryAfter = dur(s.retryAfter(now, limit-n, recent, old, f))
	}
	d.Remaining = max(0, limit-used)
	d.ResetAfter = dur(s.resetAfter(now))
	return d
}

// refund takes units back from the newest sub-windows first.
func (s *SlidingWindow) refund(n int64) {
	for j := s.cur; j > s.cur-int64(len(s.counts)) && n > 0; j-- {
		c := s.slot(j)
		take := min(*c, n)
		*c -= take
		n -= take
	}
}

// retryAfter finds the earliest instant from now at which the estimate is at most need,
// if nothing else is admitted. recent, old and f are the estimate at now.
func (s *SlidingWindow) retryAfter(now, need, recent, old, f0 int64) int64 {
	return SlidingRetryAfter(now, need, recent, old, f0, int64(len(s.counts))-1, s.sub, s.cur,
		func(j int64) int64 { return *s.slot(j) })
}

// SlidingEstimate is the sliding window's count at offset f into its newest sub-window of
// length sub: the counts of the N-1 newer sub-windows (recent) and the oldest one's (old)
// weighted by the part of it still inside the window, rounded up.
func SlidingEstimate(recent, old, f, sub int64) int64 {
	return recent + mulDivCeil(old, sub-f, sub)
}

// SlidingRetryAfter is the sliding window's RetryAfter: the time from now until the estimate
// is at most need, if nothing else is admitted, for N sub-windows of length sub, the newest
// being cur; recent, old and f0 are the estimate at now (see SlidingEstimate) and count(j)
// returns sub-window j's count. Package distributed's local view of a window shares it.
func SlidingRetryAfter(now, need, recent, old, f0, n, sub, cur int64, count func(j int64) int64) int64 {
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
			leaving = count(j)
		}
		recent -= leaving
		old = leaving
	}
	return (cur+n+1)*sub - now // unreachable for need >= 0
}

// resetAfter is how long until every counted unit has slid out of the window.
func (s *SlidingWindow) resetAfter(now int64) int64 {
	n := int64(len(s.counts)) - 1
	for j := s.cur; j >= s.cur-n; j-- {
		if *s.slot(j) != 0 {
			return (j+n+1)*s.sub - now
		}
	}
	return 0
}

// Clone returns a deep copy of the state.
func (s *SlidingWindow) Clone() State {
	c := *s
	c.counts = append([]int64(nil), s.counts...)
	return &c
}
