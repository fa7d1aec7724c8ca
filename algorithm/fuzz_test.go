package algorithm_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// FuzzAlgorithms drives every algorithm with an arbitrary rule and operation sequence: time
// steps forward and backward, takes, peeks, refunds, waits and settles. Nothing may
// panic, and every decision must be internally consistent.
func FuzzAlgorithms(f *testing.F) {
	f.Add(uint8(1), int64(10), int64(1000), int64(0), uint8(0), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(3), int64(7), int64(60000), int64(0), uint8(12), []byte{200, 0, 1, 255, 3, 128, 9})
	f.Add(uint8(6), int64(1000), int64(1000), int64(5000), uint8(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, alg uint8, limit, periodMS, burst int64, sub uint8, ops []byte) {
		r := sluice.Rule{Algorithm: sluice.Algorithm(alg%6 + 1), Limit: limit, Period: time.Duration(periodMS) * time.Millisecond, Burst: burst, SubWindows: int(sub)}
		if r.Validate() != nil {
			return
		}
		s, p := algorithm.New(r.Algorithm), algorithm.Compile(r)
		now := int64(1_700_000_000_000_000_000)
		for len(ops) >= 3 {
			op, arg := ops[0], int64(binary.LittleEndian.Uint16(ops[1:3]))
			ops = ops[3:]
			switch op % 7 {
			case 0: // time forward, up to ~2 periods
				now += arg * int64(r.Period) / 32768
			case 1: // time backward
				now -= arg * int64(r.Period) / 65536
			case 2, 3:
				n := arg % (r.Capacity() + 2)
				d := s.Take(now, &p, n, 0)
				if d.Remaining < 0 || d.Remaining > r.Capacity() || (d.Allowed && d.RetryAfter != 0) || d.ResetAfter < 0 {
					t.Fatalf("%s n=%d: inconsistent %+v", r, n, d)
				}
				if !d.Allowed && n <= r.Capacity() && d.RetryAfter <= 0 {
					t.Fatalf("%s n=%d: denied without a retry time: %+v", r, n, d)
				}
			case 4:
				s.Take(now, &p, -(arg % (r.Capacity() + 1)), 0)
			case 5:
				d := s.Take(now, &p, 1, arg*int64(time.Millisecond))
				if d.Delay < 0 || d.Delay > time.Duration(arg)*time.Millisecond {
					t.Fatalf("%s: wait delay %v outside [0, %dms]", r, d.Delay, arg)
				}
			case 6: // a settle, past the limit or a refund; sometimes the largest
				n := int64(int16(arg)) * max(1, r.Capacity()/64)
				if arg%251 == 0 {
					n = sluice.MaxLimit
				}
				d := s.Settle(now, &p, n)
				if !d.Allowed || d.Remaining < 0 || d.Remaining > r.Capacity() || d.RetryAfter < 0 ||
					d.ResetAfter < d.RetryAfter || (d.Remaining > 0 && d.RetryAfter != 0) || d.Delay != 0 {
					t.Fatalf("%s settle %d: inconsistent %+v", r, n, d)
				}
			}
		}
	})
}
