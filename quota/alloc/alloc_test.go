package alloc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func sum(s []int64) (t int64) {
	for _, v := range s {
		t += v
	}
	return t
}

func TestMaxMinFairTable(t *testing.T) {
	for _, tc := range []struct {
		limit   int64
		demands []float64
		want    []int64
	}{
		{100, []float64{10, 20, 200}, []int64{10, 20, 70}},
		{100, []float64{50, 50, 50, 50}, []int64{25, 25, 25, 25}},
		{100, []float64{10, 10}, []int64{50, 50}},        // surplus spread equally
		{100, []float64{10, 30}, []int64{40, 60}},        // 10+30 and 30 each
		{10, []float64{100, 100, 100}, []int64{4, 3, 3}}, // rounding to the first
		{100, []float64{-5, math.NaN(), 300}, []int64{0, 0, 100}},
		{0, []float64{1, 2}, []int64{0, 0}},
	} {
		got := make([]int64, len(tc.demands))
		MaxMinFair(tc.limit, tc.demands, got)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("MaxMinFair(%d, %v) = %v, want %v", tc.limit, tc.demands, got, tc.want)
		}
	}
}

// TestMaxMinFairProperty checks the definition of max-min fairness on random demands: the
// shares sum to the limit; a client below its demand has at least every other client's
// share less one (rounding), so no client could gain without taking from a smaller one; and
// when the demands fit, every client gets at least its demand.
func TestMaxMinFairProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 5000; iter++ {
		n := 1 + r.IntN(20)
		limit := int64(r.IntN(10000))
		demands := make([]float64, n)
		var total float64
		for i := range demands {
			// skewed: a few heavy clients
			demands[i] = math.Floor(math.Pow(r.Float64(), 3) * float64(limit) * 1.5)
			total += demands[i]
		}
		shares := make([]int64, n)
		MaxMinFair(limit, demands, shares)
		if got := sum(shares); got != limit {
			t.Fatalf("limit %d demands %v: shares %v sum to %d", limit, demands, shares, got)
		}
		var top int64
		for _, s := range shares {
			top = max(top, s)
		}
		for i, s := range shares {
			if s < 0 {
				t.Fatalf("negative share %v", shares)
			}
			if float64(s) < demands[i]-1 && s < top-1 {
				t.Fatalf("limit %d demands %v shares %v: client %d below demand with share %d < top %d - 1", limit, demands, shares, i, s, top)
			}
			if total <= float64(limit) && float64(s) < demands[i]-1 {
				t.Fatalf("limit %d demands %v fit, shares %v: client %d below demand", limit, demands, shares, i)
			}
		}
	}
}

func TestProportionalSplit(t *testing.T) {
	got := make([]int64, 3)
	ProportionalSplit(100, []float64{10, 30, 60}, got)
	if fmt.Sprint(got) != "[10 30 60]" {
		t.Errorf("got %v", got)
	}
	ProportionalSplit(100, []float64{0, 0, 0}, got)
	if sum(got) != 100 || got[0] != 34 {
		t.Errorf("zero demands: got %v", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 1000; iter++ {
		n := 1 + r.IntN(10)
		d := make([]float64, n)
		for i := range d {
			d[i] = r.Float64() * 1000
		}
		s := make([]int64, n)
		limit := int64(r.IntN(5000))
		ProportionalSplit(limit, d, s)
		if sum(s) != limit {
			t.Fatalf("sum %d != %d", sum(s), limit)
		}
	}
}

// TestBucketNeverOvercommits drives a bucket with random clients reporting random usage at
// random instants, leaving and coming back, and checks after every report that the shares
// clients may hold sum to at most the limit (holds only decrease between reports, so the
// instant of a report is the worst one). With classes, each client is of a criticality
// class and the heavy demand moves from class to class every 1000 steps.
func TestBucketNeverOvercommits(t *testing.T) {
	for _, classes := range []bool{false, true} {
		for _, pol := range []Fairness{MaxMin, Proportional, Static} {
			r := rand.New(rand.NewPCG(5, uint64(pol)))
			s := &Settings{Limit: 1000, Period: time.Second, Fairness: pol, StaticShare: 300, TTL: 3 * time.Second}
			var b Bucket
			now := int64(0)
			for i := 0; i < 5000; i++ {
				now += int64(r.IntN(int(500 * time.Millisecond)))
				n := r.IntN(12)
				id := fmt.Sprint("c", n)
				if r.IntN(20) == 0 {
					b.Leave(id)
					continue
				}
				count := math.Floor(math.Pow(r.Float64(), 2) * 3000)
				class := sluice.Critical
				if classes {
					class = sluice.Criticalities()[n%4]
					if (i/1000)%4 != n%4 {
						count = math.Floor(count / 10) // the heavy demand is the one class's
					}
				}
				a := b.ReportClass(s, id, class, now, count, time.Duration(r.IntN(int(2*time.Second))))
				if a.Share < 0 || a.Expires != now+int64(s.TTL) {
					t.Fatalf("bad assignment %+v", a)
				}
				if c := b.Committed(now); c > s.Limit {
					t.Fatalf("%v (classes %v): step %d: committed %d > limit %d", pol, classes, i, c, s.Limit)
				}
				for _, c := range b.Clients {
					if len(c.Held) > MaxHeld || len(c.History) > DefaultHistory {
						t.Fatalf("client state unbounded: %+v", c)
					}
				}
				if got := b.Clients[id].Class; got != class {
					t.Fatalf("client %s recorded as %v, want %v", id, got, class)
				}
			}
		}
	}
}

// TestBucketConverges: with steady skewed demands reported every interval, every client's
// assignment equals its max-min fair share once one TTL has passed after the demands are
// known, and a client that leaves frees its share to the others within one interval plus
// the TTL.
func TestBucketConverges(t *testing.T) {
	const interval = int64(time.Second)
	s := &Settings{Limit: 1000, Period: time.Second, TTL: 2 * time.Second}
	demands := []float64{10, 20, 40, 80, 160, 320, 640, 1280, 50, 5}
	var b Bucket
	ids := make([]string, len(demands))
	for i := range ids {
		ids[i] = fmt.Sprint("client-", i)
	}
	got := map[string]int64{}
	round := func(now int64, skip string) {
		for i, id := range ids {
			if id != skip {
				got[id] = b.Report(s, id, now, demands[i], time.Duration(interval)).Share
			}
		}
		if c := b.Committed(now); c > s.Limit {
			t.Fatalf("committed %d > %d", c, s.Limit)
		}
	}
	want := make([]int64, len(demands))
	MaxMinFair(s.Limit, demands, want)
	now := int64(0)
	for r := 0; r < 4; r++ {
		round(now, "")
		now += interval
	}
	for i, id := range ids {
		if got[id] != want[i] {
			t.Fatalf("after 4 rounds: %s got %d, want %d (all: %v)", id, got[id], want[i], got)
		}
	}
	// client 7 (the heaviest) leaves: the others get its share within interval + TTL.
	b.Leave(ids[7])
	rest := append(append([]float64{}, demands[:7]...), demands[8:]...)
	want2 := make([]int64, len(rest))
	MaxMinFair(s.Limit, rest, want2)
	deadline := now + interval + int64(s.TTL)
	for ; now <= deadline; now += interval {
		round(now, ids[7])
	}
	j := 0
	for i, id := range ids {
		if i == 7 {
			continue
		}
		if got[id] != want2[j] {
			t.Errorf("after leave: %s got %d, want %d", id, got[id], want2[j])
		}
		j++
	}
}

func TestBucketNewClientWaitsForFreedShare(t *testing.T) {
	s := &Settings{Limit: 100, Period: time.Second, TTL: 2 * time.Second}
	var b Bucket
	sec := int64(time.Second)
	if a := b.Report(s, "a", 0, 500, time.Second); a.Share != 100 {
		t.Fatalf("alone: %+v", a)
	}
	// b arrives: a still holds 100 until its assignment expires at 2s.
	if a := b.Report(s, "b", sec/2, 500, time.Second); a.Share != 0 {
		t.Fatalf("newcomer got %d while the limit is held", a.Share)
	}
	if a := b.Report(s, "a", sec, 500, time.Second); a.Share != 50 {
		t.Fatalf("a shrinks to %d, want 50", a.Share)
	}
	if a := b.Report(s, "b", 3*sec/2, 500, time.Second); a.Share != 0 {
		t.Fatalf("b before a's old assignment expired: %d", a.Share)
	}
	if a := b.Report(s, "b", 2*sec, 500, time.Second); a.Share != 50 {
		t.Fatalf("b after expiry: %d, want 50", a.Share)
	}
	if c := b.Committed(2 * sec); c != 100 {
		t.Fatalf("committed %d", c)
	}
}

func TestEncodeClient(t *testing.T) {
	c := &Client{History: []Sample{{Count: 12.5, Elapsed: 1e9}, {Count: 0, Elapsed: 3}}, Seen: -5, Left: true,
		Held: []Assignment{{Share: 100, Expires: 1 << 60}, {Share: 3, Expires: 7}}}
	b := AppendClient(nil, c)
	got, err := DecodeClient(b)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for i := range b {
		if _, err := DecodeClient(b[:i]); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
	if _, err := DecodeClient(append(b, 0)); err == nil {
		t.Fatal("trailing byte decoded")
	}
}
