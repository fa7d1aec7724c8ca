package replay

import "time"

// series counts requests and denials over time in at most 2 x points buckets: when the
// log runs past them, neighbouring buckets merge and their width doubles.
type series struct {
	cap      int
	start    int64
	width    int64
	requests []int64
	denials  []int64
}

func newSeries(points int, start int64) *series {
	return &series{cap: points, start: start, width: int64(time.Second)}
}

func (s *series) add(at, n int64, denied bool) {
	i := int((at - s.start) / s.width)
	for i >= 2*s.cap {
		s.halve()
		i = int((at - s.start) / s.width)
	}
	for i >= len(s.requests) {
		s.requests = append(s.requests, 0)
		s.denials = append(s.denials, 0)
	}
	s.requests[i] += n
	if denied {
		s.denials[i] += n
	}
}

// halve merges neighbouring buckets, doubling their width.
func (s *series) halve() {
	for i := 0; i < len(s.requests); i += 2 {
		r, d := s.requests[i], s.denials[i]
		if i+1 < len(s.requests) {
			r, d = r+s.requests[i+1], d+s.denials[i+1]
		}
		s.requests[i/2], s.denials[i/2] = r, d
	}
	n := (len(s.requests) + 1) / 2
	s.requests, s.denials = s.requests[:n], s.denials[:n]
	s.width *= 2
}

// Point is one bucket of a rule's series: the units requested and denied in [At, At+Width).
type Point struct {
	At       time.Time     `json:"at"`
	Width    time.Duration `json:"width"`
	Requests int64         `json:"requests"`
	Denials  int64         `json:"denials"`
}

func (s *series) points() []Point {
	out := make([]Point, len(s.requests))
	for i := range out {
		out[i] = Point{At: time.Unix(0, s.start+int64(i)*s.width).UTC(), Width: time.Duration(s.width),
			Requests: s.requests[i], Denials: s.denials[i]}
	}
	return out
}
