package algorithm_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// TestApply drives two states of every algorithm with random valid requests of every kind:
// one through Apply, the other through the State method the request's fields select, as each
// store dispatched them before Apply. Their decisions and
// states must stay the same.
func TestApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, a := range sluice.Algorithms() {
		for range 20 {
			r := randomRule(rng, a)
			p := algorithm.Compile(r)
			applied, direct := algorithm.New(a), algorithm.New(a)
			now := int64(1_700_000_000_000_000_000)
			for i := range 300 {
				now += trafficGap(rng, int64(r.Period))
				req := randomRequest(rng, r)
				if err := req.Validate(0); err != nil {
					t.Fatalf("%s: invalid request %+v: %v", r, req, err)
				}
				got, err := algorithm.Apply(applied, now, &p, &req)
				if err != nil {
					t.Fatal(err)
				}
				var want sluice.Decision
				switch { // the dispatch each store wrote before Apply, from the fields
				case req.Settle:
					want = direct.Settle(now, &p, req.N)
				case req.Holdback > 0:
					want = algorithm.TakeHoldback(direct, now, &p, req.N, req.Holdback)
				default:
					want = direct.Take(now, &p, req.N, int64(req.MaxDelay))
				}
				if algorithm.TakeDecides(req.Kind()) != (!req.Settle && req.Holdback <= 0) {
					t.Fatalf("TakeDecides(%s) = %v", req.Kind(), algorithm.TakeDecides(req.Kind()))
				}
				if got != want {
					t.Fatalf("%s step %d, %s %+v: Apply %+v, want %+v", r, i, req.Kind(), req, got, want)
				}
				if g, w := algorithm.AppendState(nil, applied), algorithm.AppendState(nil, direct); string(g) != string(w) {
					t.Fatalf("%s step %d, %s: states differ after Apply", r, i, req.Kind())
				}
			}
		}
	}
}

// randomRequest draws a valid request of a random kind under r.
func randomRequest(rng *rand.Rand, r sluice.Rule) sluice.Request {
	req := sluice.Request{Key: "k", Rule: r, N: 1 + rng.Int64N(r.Capacity()+1)}
	switch rng.IntN(6) {
	case 0:
		req.N = 0
	case 1:
		req.N = -rng.Int64N(r.Capacity() + 1)
	case 2:
		req.MaxDelay = time.Duration(rng.Int64N(2*int64(r.Period) + 1))
	case 3:
		req.Holdback = 1 + rng.Int64N(r.Capacity())
	case 4:
		req.Settle, req.N = true, rng.Int64N(4*r.Capacity()+1)-2*r.Capacity()
	}
	return req
}
