package algorithm_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// TestEncodingRoundTrip: after every decision of random traffic, the state decoded from its
// encoding decides the next request exactly as the state itself, and encodes the same.
func TestEncodingRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, a := range sluice.Algorithms() {
		for range 20 {
			r := randomRule(rng, a)
			p := algorithm.Compile(r)
			st := algorithm.New(a)
			now := int64(1_900_000_000_000_000_000)
			for range 200 {
				now += trafficGap(rng, int64(r.Period))
				if rng.IntN(10) == 0 {
					now -= rng.Int64N(int64(r.Period))
				}
				n := 1 + rng.Int64N(3)
				if rng.IntN(8) == 0 {
					n = -n
				}
				enc := algorithm.AppendState(nil, st)
				dec, err := algorithm.DecodeState(enc)
				if err != nil {
					t.Fatalf("%s: decode %x: %v", r, enc, err)
				}
				if again := algorithm.AppendState(nil, dec); string(again) != string(enc) {
					t.Fatalf("%s: re-encoded %x, want %x", r, again, enc)
				}
				want, got := st.Take(now, &p, n, 0), dec.Take(now, &p, n, 0)
				if got != want {
					t.Fatalf("%s n=%d: decoded state decided %+v, want %+v", r, n, got, want)
				}
			}
		}
	}
}

// TestDecodeStateRejects: bytes AppendState did not write are an error, never a panic.
func TestDecodeStateRejects(t *testing.T) {
	for _, b := range [][]byte{nil, {0}, {99}, {byte(sluice.AlgorithmGCRA)}, {byte(sluice.AlgorithmGCRA), 2, 2},
		{byte(sluice.AlgorithmSlidingLog), 2, 5, 1}, {byte(sluice.AlgorithmSlidingWindow), 0, 2, 0xff, 0x7f}} {
		if _, err := algorithm.DecodeState(b); !errors.Is(err, algorithm.ErrBadEncoding) {
			t.Errorf("%x: %v, want ErrBadEncoding", b, err)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add([]byte{byte(sluice.AlgorithmSlidingLog), 4, 2, 10, 3})
	ledger := &algorithm.Ledger{State: algorithm.New(sluice.AlgorithmGCRA), Open: []algorithm.Reservation{{ID: sluice.ReservationID{1}, Held: 3, Counted: 3, Until: 1 << 62, Expires: 5, Free: true}}}
	f.Add(algorithm.AppendState(nil, ledger))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := algorithm.DecodeState(b)
		if err != nil {
			return
		}
		r := sluice.Rule{Algorithm: s.Algorithm(), Limit: 5, Period: 1e9}
		p := algorithm.Compile(r)
		s.Take(1e18, &p, 1, 0)
		for _, op := range []sluice.BudgetOp{sluice.BudgetReserve, sluice.BudgetExtend, sluice.BudgetCommit} {
			req := sluice.Request{Key: "k", Rule: r, N: 2, Budget: sluice.BudgetStep{Op: op, ID: sluice.ReservationID{1}}}
			_, _ = algorithm.Apply(algorithm.WithLedger(s), 1e18, &p, &req)
		}
	})
}
