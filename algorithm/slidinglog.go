package algorithm

import "github.com/sluicehq/sluice"

// SlidingLog keeps the time of every admitted unit in a ring of timestamps: exact (no span of
// one period ever sees more than Limit), 8 bytes per unit held. The ring grows with the units
// it holds (doubling, up to Limit), so a key with a large limit and little traffic stays
// small. Denied requests are not recorded, so a client over its limit regains capacity as its
// old requests age out.
//
// A unit admitted at t counts for decisions at instants in [t, t+Period).
//
// A settle (Settle) records its units past the limit: the debt is the timestamps beyond Limit,
// and the key admits nothing until enough of them have aged out. The log keeps at most
// 2 x Limit timestamps (16 x Limit bytes), the newest: a charge beyond drops the oldest. That
// changes no decision (a request of n >= 0 units depends only on the newest Limit timestamps,
// and the dropped ones would have aged out first), except that a later refund of more than
// Limit units finds less debt to take back than an unbounded log would. A lowered limit keeps
// the newest 2 x Limit timestamps the same way.
type SlidingLog struct {
	ring  []int64 // timestamps, oldest at head; len(ring) <= limit
	head  int
	count int
	limit int64 // the limit of the last decision
}

// minLogRing is the ring's first size.
const minLogRing = 8

// Algorithm returns sluice.AlgorithmSlidingLog.
func (*SlidingLog) Algorithm() sluice.Algorithm { return sluice.AlgorithmSlidingLog }

// Len reports how many admitted units the log holds (some may have aged out since the last
// Take).
func (s *SlidingLog) Len() int { return s.count }

func (s *SlidingLog) at(i int) int64 { return s.ring[(s.head+i)%len(s.ring)] }

func (s *SlidingLog) newest() int64 { return s.at(s.count - 1) }

// setLimit applies a new limit: the newest min(count, Limit + MaxDebt) timestamps are kept, in
// a ring no longer than the limit unless they need more. Dropping the oldest ones admits
// nothing extra: they would have aged out before any kept one.
func (s *SlidingLog) setLimit(pr *Params) {
	s.limit = pr.Rule.Limit
	keep := min(s.count, int(s.limit+pr.maxDebt))
	if size := max(keep, int(s.limit)); len(s.ring) > size {
		s.regrow(size, keep)
	}
}

// grow makes room for need timestamps, at least doubling the ring, up to the limit (or need,
// when a settle needs more).
func (s *SlidingLog) grow(need int) {
	if need <= len(s.ring) {
		return
	}
	s.regrow(min(max(need, 2*len(s.ring), minLogRing), max(need, int(s.limit))), s.count)
}

// push records k units at now.
func (s *SlidingLog) push(now int64, k int) {
	s.grow(s.count + k)
	for range k {
		s.ring[(s.head+s.count)%len(s.ring)] = now
		s.count++
	}
}

// regrow moves the newest keep timestamps into a new ring of the given size.
func (s *SlidingLog) regrow(size, keep int) {
	ring := make([]int64, size)
	for i := 0; i < keep; i++ {
		ring[i] = s.at(s.count - keep + i)
	}
	s.ring, s.head, s.count = ring, 0, keep
}

// Take implements State.
func (s *SlidingLog) Take(now int64, pr *Params, n, _ int64) sluice.Decision {
	limit := pr.Rule.Limit
	if s.limit != limit {
		s.setLimit(pr)
	}
	if s.count > 0 && now < s.newest() {
		now = s.newest() // the clock went backwards: time stands still
	}
	p := pr.period
	for s.count > 0 && s.ring[s.head] <= now-p {
		s.head = (s.head + 1) % len(s.ring)
		s.count--
	}
	c := int64(s.count)
	d := sluice.Decision{Capacity: limit}
	switch {
	case n > limit:
		return never(limit, max(0, limit-c), s.resetAfter(now, p))
	case n < 0:
		s.count -= int(min(-n, c))
		d.Allowed = true
	case c+n <= limit:
		s.push(now, int(n))
		d.Allowed = true
	default:
		// The request fits once the oldest c+n-limit units have aged out.
		d.RetryAfter = dur(s.at(int(c+n-limit-1)) + p - now)
	}
	d.Remaining = max(0, limit-int64(s.count))
	d.ResetAfter = dur(s.resetAfter(now, p))
	return d
}

// Settle implements State (see SlidingLog for the debt).
func (s *SlidingLog) Settle(now int64, pr *Params, n int64) sluice.Decision {
	return settle(s, now, pr, n)
}

// charge records n units at now (the newest instant, if the clock went back), keeping the
// newest Limit + MaxDebt timestamps.
func (s *SlidingLog) charge(now int64, pr *Params, n int64) {
	if s.count > 0 {
		now = max(now, s.newest())
	}
	bound := int(pr.Rule.Limit + pr.maxDebt)
	k := int(min(n, int64(bound)))
	if drop := s.count + k - bound; drop > 0 {
		s.head = (s.head + drop) % len(s.ring)
		s.count -= drop
	}
	s.push(now, k)
}

func (s *SlidingLog) resetAfter(now, p int64) int64 {
	if s.count == 0 {
		return 0
	}
	return s.newest() + p - now
}

// Clone returns a deep copy of the state.
func (s *SlidingLog) Clone() State {
	c := *s
	c.ring = append([]int64(nil), s.ring...)
	return &c
}
