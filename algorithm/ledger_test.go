package algorithm_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// budgetStep returns a budget step request on key "k" under r.
func budgetStep(r sluice.Rule, op sluice.BudgetOp, id byte, n int64, mode sluice.BudgetMode) sluice.Request {
	req := sluice.Request{Key: "k", Rule: r, N: n, Budget: sluice.BudgetStep{Op: op, Mode: mode}}
	req.Budget.ID[0] = id
	return req
}

func applyStep(t *testing.T, st algorithm.State, now int64, p *algorithm.Params, req sluice.Request) (sluice.Decision, error) {
	t.Helper()
	if err := req.Validate(0); err != nil {
		t.Fatalf("invalid step %+v: %v", req, err)
	}
	return algorithm.Apply(st, now, p, &req)
}

// openTotals is what a reference ledger holds: per reservation, its held units.
type openTotals map[byte]int64

// TestPropertyBudgetAtOneInstant: at one instant (no refill, no window passing), every
// algorithm admits budget steps exactly as an exact count of the units charged does: a strict
// reserve or extension of n while used + n <= capacity, a bounded one while used <= capacity
// - 1 (n <= capacity, more is never), a commit charging its excess and giving back its
// over-estimate; so n concurrent reservations never all pass on the same remaining budget
// (strict: never over the capacity; bounded: over by less than one reservation). A step on a
// reservation not open is an error and moves nothing.
func TestPropertyBudgetAtOneInstant(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 33))
		for _, a := range sluice.Algorithms() {
			r := randomRule(rng, a)
			if a == sluice.AlgorithmSlidingLog {
				r.Limit = min(r.Limit, 5000)
			}
			p := algorithm.Compile(r)
			c := r.Capacity()
			st := algorithm.WithLedger(algorithm.New(a))
			now := int64(1_700_000_000_000_000_000)
			if !a.Bucket() {
				now = algorithm.WindowIndex(now, int64(r.Period))*int64(r.Period) + int64(r.Period)/2
			}
			var used, maxN int64
			excess := false // a commit charged more than its reservation held
			open := openTotals{}
			mode := sluice.BudgetMode(rng.IntN(2))
			for i := range 200 {
				id := byte(1 + rng.IntN(12))
				n := rng.Int64N(c/3 + 2)
				if rng.IntN(10) == 0 {
					n = c + 1 + rng.Int64N(5)
				}
				op := []sluice.BudgetOp{sluice.BudgetReserve, sluice.BudgetReserve, sluice.BudgetExtend, sluice.BudgetCommit}[rng.IntN(4)]
				// what names the step in a failure (formatted then only: the test makes 240,000)
				usedBefore := used
				what := func() string {
					return fmt.Sprintf("seed %d %s %s step %d: %v of %d on #%d, used %d", seed, r, mode, i, op, n, id, usedBefore)
				}
				held, isOpen := open[id]
				refused := op == sluice.BudgetReserve && isOpen || op != sluice.BudgetReserve && !isOpen
				var before []byte
				if refused {
					before = algorithm.AppendState(nil, st)
				}
				d, err := applyStep(t, st, now, &p, budgetStep(r, op, id, n, mode))
				switch {
				case refused:
					if err == nil {
						t.Fatalf("%s: no error", what())
					}
					if string(algorithm.AppendState(nil, st)) != string(before) {
						t.Fatalf("%s: a refused step moved the state: %v", what(), err)
					}
					continue
				case err != nil:
					t.Fatalf("%s: %v", what(), err)
				case op == sluice.BudgetCommit:
					delete(open, id)
					if n > held {
						used += n - held
						excess = true
					} else {
						used = max(0, used-(held-n))
					}
					if !d.Allowed {
						t.Fatalf("%s: a commit refused", what())
					}
					continue
				}
				want := used+n <= c
				if mode == sluice.Bounded {
					want = used < c && n <= c
				}
				if op == sluice.BudgetExtend && n == 0 {
					want = true
				}
				if d.Allowed != want {
					t.Fatalf("%s: allowed %v, want %v (%+v)", what(), d.Allowed, want, d)
				}
				if want {
					open[id] += n
					used += n
					maxN = max(maxN, n)
				} else if n > c && d.RetryAfter != sluice.Never {
					t.Fatalf("%s: more than the capacity %d refused with RetryAfter %v", what(), c, d.RetryAfter)
				}
				if bound := c + max(0, maxN-1); !excess && (mode == sluice.Bounded && used > bound || mode == sluice.Strict && used > c) {
					t.Fatalf("%s: %d units held, over the bound", what(), used)
				}
			}
		}
	}
}

// TestPropertyBudgetFixedWindowOverTime: on a fixed window, over random traffic across many
// windows, budget steps are admitted exactly as a count per window of what was charged in it,
// where a commit gives back the over-estimate of a reservation only in the window of its last
// charge (its units left with that window otherwise), and expired reservations are dropped
// (costing what they held, or given back in their window when free). So each window's count
// never exceeds the limit in strict mode, nor the limit plus one reservation in bounded mode.
func TestPropertyBudgetFixedWindowOverTime(t *testing.T) {
	type ref struct {
		held, counted, window, expires int64
		free                           bool
	}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 34))
		r := sluice.FixedWindow(1+rng.Int64N(200), time.Duration(1+rng.Int64N(4000))*time.Millisecond)
		p := algorithm.Compile(r)
		period, c := int64(r.Period), r.Capacity()
		mode := sluice.BudgetMode(rng.IntN(2))
		st := algorithm.WithLedger(algorithm.New(r.Algorithm))
		now := int64(1_700_000_000_000_000_000) / int64(time.Millisecond) * int64(time.Millisecond)
		var win, count int64 = -1, 0
		open := map[byte]*ref{}
		for i := range 2000 {
			now += rng.Int64N(period/8+1) / int64(time.Millisecond) * int64(time.Millisecond)
			w := algorithm.WindowIndex(now, period)
			if w != win {
				win, count = w, 0
			}
			// expiry, as the ledger does before every step
			var back int64
			for id, o := range open {
				if now >= o.expires {
					if o.free && o.window == w {
						back += o.counted
					}
					delete(open, id)
				}
			}
			count = max(0, count-back)
			id := byte(1 + rng.IntN(10))
			n := rng.Int64N(c/2 + 2)
			op := []sluice.BudgetOp{sluice.BudgetReserve, sluice.BudgetExtend, sluice.BudgetCommit}[rng.IntN(3)]
			req := budgetStep(r, op, id, n, mode)
			req.Budget.TTL = time.Duration(1+rng.Int64N(period/int64(time.Millisecond))) * time.Millisecond
			req.Budget.FreeOnExpiry = rng.IntN(2) == 0
			// what names the step in a failure (formatted then only: the test makes 600,000)
			countBefore := count
			what := func() string {
				return fmt.Sprintf("seed %d %s %s step %d at +%v: %v of %d on #%d, count %d", seed, r, mode, i, time.Duration(now-w*period), op, n, id, countBefore)
			}
			d, err := applyStep(t, st, now, &p, req)
			o := open[id]
			switch {
			case (op == sluice.BudgetReserve) == (o != nil):
				if err == nil {
					t.Fatalf("%s: no error", what())
				}
				continue
			case err != nil:
				t.Fatalf("%s: %v", what(), err)
			case op == sluice.BudgetCommit:
				delete(open, id)
				switch {
				case n > o.held:
					count += n - o.held
				case o.window == w:
					count = max(0, count-min(o.held-n, o.counted))
				}
				continue
			}
			want := count+n <= c
			if mode == sluice.Bounded {
				want = count < c && n <= c
			}
			if op == sluice.BudgetExtend && n == 0 {
				want = true
			}
			if d.Allowed != want {
				t.Fatalf("%s: allowed %v, want %v (%+v)", what(), d.Allowed, want, d)
			}
			if !want {
				continue
			}
			if o == nil {
				o = &ref{free: req.Budget.FreeOnExpiry}
				open[id] = o
			}
			if o.window != w {
				o.counted = 0
			}
			o.held += n
			o.counted += n
			o.window = w
			o.expires = now + int64(req.Budget.TTL)
			// the remaining is what was left when the step came: exact but for a renewal of a
			// key in debt (a peek, at 0)
			if got := c - d.Remaining; (d.Remaining > 0 || n > 0) && got != count {
				t.Fatalf("%s: the state counted %d when the step came, the reference %d", what(), got, count)
			}
			count += n
		}
	}
}

// TestBudgetSteps spells out one reservation's life on a token bucket of 10 (refilling 10 a
// second) and a fixed window of 10 a second.
func TestBudgetSteps(t *testing.T) {
	tb := sluice.TokenBucket(10, time.Second, 10)
	p := algorithm.Compile(tb)
	st := algorithm.WithLedger(algorithm.New(tb.Algorithm))
	now := int64(1_700_000_000_000_000_000)
	step := func(op sluice.BudgetOp, id byte, n int64, mode sluice.BudgetMode) (sluice.Decision, error) {
		return applyStep(t, st, now, &p, budgetStep(tb, op, id, n, mode))
	}
	// strict: 6 fit (10 were left when it came), then 5 do not (4 left)
	if d, _ := step(sluice.BudgetReserve, 1, 6, sluice.Strict); !d.Allowed || d.Remaining != 10 {
		t.Fatalf("reserve 6: %+v", d)
	}
	if d, _ := step(sluice.BudgetReserve, 2, 5, sluice.Strict); d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("strict reserve of 5 with 4 left: %+v", d)
	}
	// bounded: 5 are admitted while 4 are left (the remaining it shows), and the key goes 1
	// into debt
	if d, _ := step(sluice.BudgetReserve, 2, 5, sluice.Bounded); !d.Allowed || d.Remaining != 4 || d.RetryAfter != 0 {
		t.Fatalf("bounded reserve of 5 with 4 left: %+v", d)
	}
	if d, _ := step(sluice.BudgetReserve, 3, 1, sluice.Bounded); d.Allowed || d.RetryAfter != 200*time.Millisecond {
		t.Fatalf("bounded reserve with the budget spent (1 in debt): %+v", d)
	}
	// commit #1 at 2 of its 6: 4 back, 3 left
	if d, err := step(sluice.BudgetCommit, 1, 2, 0); err != nil || !d.Allowed || d.Remaining != 3 {
		t.Fatalf("commit 2 of 6: %+v %v", d, err)
	}
	// a second commit moves nothing
	if _, err := step(sluice.BudgetCommit, 1, 2, 0); !errors.Is(err, sluice.ErrNoReservation) {
		t.Fatalf("commit twice: %v", err)
	}
	var fe *sluice.FieldError
	if _, err := step(sluice.BudgetExtend, 9, 1, 0); !errors.As(err, &fe) || fe.Field != "id" {
		t.Fatalf("extend unknown: %v", err)
	}
	// #2 held 5 and used 9: 4 more charged, 1 in debt again
	if d, _ := step(sluice.BudgetCommit, 2, 9, 0); d.Remaining != 0 || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("commit 9 of 5: %+v", d)
	}
	// an expired reservation: its commit fails and it costs what it held
	now += int64(2 * time.Second) // full again
	if d, _ := step(sluice.BudgetReserve, 4, 7, sluice.Strict); !d.Allowed {
		t.Fatalf("reserve 7: %+v", d)
	}
	now += int64(time.Second) // its TTL (the period) is over
	if _, err := step(sluice.BudgetCommit, 4, 0, 0); !errors.Is(err, sluice.ErrNoReservation) {
		t.Fatalf("commit after the TTL: %v", err)
	}
	if len(st.Open) != 0 {
		t.Fatalf("open after expiry: %+v", st.Open)
	}
}

// TestBudgetFreeOnExpiry: a free reservation that expires gives back what the state still
// counts of it; a default one costs what it held; a fixed window gives nothing back for a
// reservation whose window has passed.
func TestBudgetFreeOnExpiry(t *testing.T) {
	for _, free := range []bool{false, true} {
		r := sluice.FixedWindow(10, time.Second)
		p := algorithm.Compile(r)
		st := algorithm.WithLedger(algorithm.New(r.Algorithm))
		now := int64(1_700_000_000_000_000_000) // a whole second
		req := budgetStep(r, sluice.BudgetReserve, 1, 8, sluice.Strict)
		req.Budget.TTL, req.Budget.FreeOnExpiry = 100*time.Millisecond, free
		if d, _ := applyStep(t, st, now, &p, req); !d.Allowed {
			t.Fatal(d)
		}
		now += int64(200 * time.Millisecond)
		d, _ := applyStep(t, st, now, &p, budgetStep(r, sluice.BudgetReserve, 2, 0, sluice.Strict))
		want := int64(2)
		if free {
			want = 10
		}
		if d.Remaining != want {
			t.Fatalf("free %v: remaining %d after expiry, want %d", free, d.Remaining, want)
		}
		// #3 expires in the next window: nothing of it to give back there
		req = budgetStep(r, sluice.BudgetReserve, 3, 2, sluice.Strict)
		req.Budget.TTL, req.Budget.FreeOnExpiry = time.Second, true
		if d, _ := applyStep(t, st, now, &p, req); !d.Allowed {
			t.Fatal(d)
		}
		now += int64(time.Second) // the next window; #3 expired in it
		d, _ = applyStep(t, st, now, &p, budgetStep(r, sluice.BudgetReserve, 4, 1, sluice.Strict))
		if d.Remaining != 10 { // what was left when #4 came
			t.Fatalf("free %v: remaining %d in the next window, want 10 (nothing of the last window's given back)", free, d.Remaining)
		}
	}
}

// TestBudgetOpenBound: a key holds at most sluice.MaxOpenReservations; one more is refused
// until the soonest expires. The ledger starts with all but two open (each step scans them:
// 10,000 steps through the race detector took 35 s), the last two and one more reserved.
func TestBudgetOpenBound(t *testing.T) {
	r := sluice.TokenBucket(sluice.MaxLimit, time.Hour, sluice.MaxLimit)
	p := algorithm.Compile(r)
	now := int64(1_700_000_000_000_000_000)
	id := func(i int) sluice.ReservationID {
		var id sluice.ReservationID
		id[1], id[2], id[3] = byte(i), byte(i>>8), 1
		return id
	}
	const first = sluice.MaxOpenReservations - 2
	st := &algorithm.Ledger{State: algorithm.New(r.Algorithm)}
	st.State.Take(now, &p, first, 0) // what they hold, 1 each
	for i := range first {
		st.Open = append(st.Open, algorithm.Reservation{ID: id(i), Held: 1, Counted: 1, Until: math.MaxInt64,
			Expires: now + int64(time.Duration(10+i%7)*time.Second)})
	}
	for i := first; i < sluice.MaxOpenReservations+1; i++ {
		req := budgetStep(r, sluice.BudgetReserve, 0, 1, sluice.Strict)
		req.Budget.ID = id(i)
		req.Budget.TTL = time.Duration(10+i%7) * time.Second
		d, err := applyStep(t, st, now, &p, req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (i < sluice.MaxOpenReservations) {
			t.Fatalf("reservation %d: %+v", i, d)
		}
		if !d.Allowed && d.RetryAfter != 10*time.Second {
			t.Fatalf("refused with RetryAfter %v, want the soonest expiry 10s", d.RetryAfter)
		}
	}
	// the encoding keeps them all
	dec, err := algorithm.DecodeState(algorithm.AppendState(nil, st))
	if err != nil || len(dec.(*algorithm.Ledger).Open) != sluice.MaxOpenReservations {
		t.Fatal(err)
	}
}

// TestLedgerEncoding: a ledger's encoding decodes to a ledger that decides the same; a ledger
// in a ledger, or a truncated one, is refused.
func TestLedgerEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, a := range sluice.Algorithms() {
		r := randomRule(rng, a)
		p := algorithm.Compile(r)
		st := algorithm.WithLedger(algorithm.New(a))
		now := int64(1_700_000_000_000_000_000)
		for i := range 40 {
			req := budgetStep(r, sluice.BudgetOp(1+rng.IntN(3)), byte(1+rng.IntN(6)), rng.Int64N(r.Capacity()/2+1), sluice.BudgetMode(rng.IntN(2)))
			req.Budget.FreeOnExpiry = rng.IntN(2) == 0
			now += rng.Int64N(int64(r.Period) / 4)
			enc := algorithm.AppendState(nil, st)
			dec, err := algorithm.DecodeState(enc)
			if err != nil {
				t.Fatalf("%s step %d: %v", r, i, err)
			}
			if string(algorithm.AppendState(nil, dec)) != string(enc) {
				t.Fatalf("%s step %d: the encoding does not round-trip", r, i)
			}
			d1, err1 := applyStep(t, st, now, &p, req)
			d2, err2 := applyStep(t, dec, now, &p, req)
			if d1 != d2 || (err1 == nil) != (err2 == nil) {
				t.Fatalf("%s step %d: %+v %v, decoded %+v %v", r, i, d1, err1, d2, err2)
			}
		}
		enc := algorithm.AppendState(nil, st)
		for cut := 1; cut < len(enc); cut++ {
			if _, err := algorithm.DecodeState(enc[:cut]); err == nil {
				t.Fatalf("%s: %d of %d bytes decoded", r, cut, len(enc))
			}
		}
		nested := append([]byte{0x80}, byte(len(enc)))
		nested = append(append(nested, enc...), 0)
		if len(enc) < 128 {
			if _, err := algorithm.DecodeState(nested); err == nil {
				t.Fatal("a ledger in a ledger decoded")
			}
		}
	}
}

// TestApplyBudgetNeedsLedger: a budget step on a bare state is a store's bug, reported.
func TestApplyBudgetNeedsLedger(t *testing.T) {
	r := sluice.PerSecond(10)
	p := algorithm.Compile(r)
	req := budgetStep(r, sluice.BudgetReserve, 1, 1, sluice.Strict)
	if _, err := algorithm.Apply(algorithm.New(r.Algorithm), 0, &p, &req); err == nil {
		t.Fatal("no error")
	}
}
