package algorithm

import "github.com/sluicehq/sluice"

// SlidingLog keeps the time of every admitted unit in a ring of Limit timestamps: exact (no
// span of one period ever sees more than Limit), 8 bytes x Limit of memory per key, allocated
// on the first decision and again only when the limit changes. Denied requests are not
// recorded, so a client over its limit regains capacity as its old requests age out.
//
// A unit admitted at t counts for decisions at instants in [t, t+Period).
type SlidingLog struct {
	ring  []int64 // timestamps, oldest at head
	head  int
	count int
}

// Algorithm returns sluice.AlgorithmSlidingLog.
func (*SlidingLog) Algorithm() sluice.Algorithm { return sluice.AlgorithmSlidingLog }

// Len reports how many admitted units the log holds (some may have aged out since the last
// Take).
func (s *SlidingLog) Len() int { return s.count }

func (s *SlidingLog) at(i int) int64 { return s.ring[(s.head+i)%len(s.ring)] }

func (s *SlidingLog) newest() int64 { return s.at(s.count - 1) }

// resize keeps the newest min(count, limit) timestamps in a ring of the new limit. Dropping the
// oldest ones admits nothing extra: they would have aged out before any kept one.
func (s *SlidingLog) resize(limit int) {
	ring := make([]int64, limit)
	keep := min(s.count, limit)
	for i := 0; i < keep; i++ {
		ring[i] = s.at(s.count - keep + i)
	}
	s.ring, s.head, s.count = ring, 0, keep
}

// Take implements State.
func (s *SlidingLog) Take(now int64, pr *Params, n, _ int64) sluice.Decision {
	limit := pr.Rule.Limit
	if len(s.ring) != int(limit) {
		s.resize(int(limit))
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
	d := sluice.Decision{Limit: limit}
	switch {
	case n > limit:
		return never(limit, limit-c, s.resetAfter(now, p))
	case n < 0:
		s.count -= int(min(-n, c))
		d.Allowed = true
	case c+n <= limit:
		for i := int64(0); i < n; i++ {
			s.ring[(s.head+s.count)%len(s.ring)] = now
			s.count++
		}
		d.Allowed = true
	default:
		// The request fits once the oldest c+n-limit units have aged out.
		d.RetryAfter = dur(s.at(int(c+n-limit-1)) + p - now)
	}
	d.Remaining = limit - int64(s.count)
	d.ResetAfter = dur(s.resetAfter(now, p))
	return d
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
