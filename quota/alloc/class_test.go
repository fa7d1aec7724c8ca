package alloc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// classBucket builds a bucket whose clients have reported demands (per period) of classes.
func classBucket(s *Settings, now int64, demands []float64, classes []sluice.Criticality) (*Bucket, []string) {
	b := &Bucket{Clients: map[string]*Client{}}
	ids := make([]string, len(demands))
	for i, d := range demands {
		ids[i] = fmt.Sprintf("c%02d", i)
		b.Clients[ids[i]] = &Client{Class: classes[i], Seen: now, History: []Sample{{Count: d, Elapsed: int64(s.Period)}}}
	}
	return b, ids
}

func targetsOf(b *Bucket, s *Settings, now int64, ids []string) []int64 {
	t := b.Targets(s, now)
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = t[id]
	}
	return out
}

const (
	cp = sluice.CriticalPlus
	cr = sluice.Critical
	sp = sluice.SheddablePlus
	sh = sluice.Sheddable
)

func TestTargetsServeClassesFirst(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  Fairness
		demands []float64
		classes []sluice.Criticality
		want    []int64
	}{
		// 700 of critical_plus fits; the sheddable three share the 300 left, max-min.
		{"over", MaxMin, []float64{300, 400, 200, 200, 50}, []sluice.Criticality{cp, cp, sh, sh, sh}, []int64{300, 400, 125, 125, 50}},
		// critical_plus alone exceeds the limit: it takes it all, max-min among its clients.
		{"top class over", MaxMin, []float64{900, 300, 100}, []sluice.Criticality{cp, cp, sh}, []int64{700, 300, 0}},
		// three classes: critical_plus 200, critical 500, the 300 left to sheddable_plus,
		// nothing for sheddable.
		{"cascade", MaxMin, []float64{500, 200, 400, 100}, []sluice.Criticality{cr, cp, sp, sh}, []int64{500, 200, 300, 0}},
		// the demands fit: max-min over every client, the surplus spread as headroom.
		{"fits", MaxMin, []float64{100, 200, 300}, []sluice.Criticality{cp, sh, cr}, []int64{233, 334, 433}},
		// fractional demands are rounded up within their class.
		{"rounding", MaxMin, []float64{100.5, 99.2, 900}, []sluice.Criticality{cp, cp, sh}, []int64{101, 99, 800}},
		{"proportional", Proportional, []float64{300, 600, 400, 400}, []sluice.Criticality{sp, sp, sh, sh}, []int64{300, 600, 50, 50}},
		// static: 400 each; the two critical ones fit, the sheddable one gets what is left.
		{"static", Static, []float64{1, 1, 1}, []sluice.Criticality{cr, sh, cr}, []int64{400, 200, 400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Settings{Limit: 1000, Period: time.Second, Fairness: tc.policy, StaticShare: 400}
			b, ids := classBucket(s, 0, tc.demands, tc.classes)
			if got := targetsOf(b, s, 0, ids); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("targets %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTargetsOneClassUnchanged: clients all of one class (whichever) are split exactly as
// without classes.
func TestTargetsOneClassUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < 500; iter++ {
		n := 1 + r.IntN(10)
		demands := make([]float64, n)
		classes := make([]sluice.Criticality, n)
		class := sluice.Criticalities()[r.IntN(4)]
		for i := range demands {
			demands[i] = math.Floor(r.Float64() * 600)
			classes[i] = class
		}
		s := &Settings{Limit: 1000, Period: time.Second, Fairness: Fairness(r.IntN(3)), StaticShare: 250}
		b, ids := classBucket(s, 0, demands, classes)
		want := make([]int64, n)
		split(s, s.Limit, demands, want)
		if got := targetsOf(b, s, 0, ids); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v class %v demands %v: %v, want %v", s.Fairness, class, demands, got, want)
		}
	}
}

// TestTargetsClassProperty checks, on random demands and classes above the limit, the
// definition of serving classes first: the targets sum to at most the limit (exactly the
// limit under max-min); a class gets anything only when every more important class got at
// least its whole demand; and within a class that got less than its demand, the split is
// max-min fair.
func TestTargetsClassProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	rank := map[sluice.Criticality]int{}
	for i, c := range sluice.Criticalities() {
		rank[c] = i
	}
	for iter := 0; iter < 3000; iter++ {
		n := 2 + r.IntN(15)
		limit := int64(1 + r.IntN(5000))
		demands := make([]float64, n)
		classes := make([]sluice.Criticality, n)
		for i := range demands {
			demands[i] = math.Floor(math.Pow(r.Float64(), 2) * float64(limit))
			classes[i] = sluice.Criticalities()[r.IntN(4)]
		}
		s := &Settings{Limit: limit, Period: time.Second}
		b, ids := classBucket(s, 0, demands, classes)
		got := targetsOf(b, s, 0, ids)
		var total float64
		for _, d := range demands {
			total += d
		}
		if total <= float64(limit) {
			continue // the fitting case is the max-min split (TestMaxMinFairProperty)
		}
		if sum(got) != limit {
			t.Fatalf("limit %d demands %v classes %v: targets %v sum to %d", limit, demands, classes, got, sum(got))
		}
		// served[k]: every client of rank k got its demand (rounded up by at most one).
		var served [4]bool
		for k := range served {
			served[k] = true
		}
		for i := range got {
			if float64(got[i]) < demands[i] {
				served[rank[classes[i]]] = false
			}
		}
		for i := range got {
			k := rank[classes[i]]
			for above := 0; above < k; above++ {
				if got[i] > 0 && !served[above] {
					t.Fatalf("limit %d demands %v classes %v targets %v: client %d (%v) gets %d while rank %d is short",
						limit, demands, classes, got, i, classes[i], got[i], above)
				}
			}
			if float64(got[i]) < demands[i]-1 && got[i] > 0 {
				for j := range got {
					if classes[j] == classes[i] && got[j] > got[i]+1 {
						t.Fatalf("limit %d demands %v classes %v targets %v: client %d short at %d while %d of its class has %d",
							limit, demands, classes, got, i, got[i], j, got[j])
					}
				}
			}
		}
	}
}

// TestClassShiftPushed: sheddable clients hold the limit; when critical demand arrives it
// gets its demand at once, and the sheddable client is pushed what is left.
func TestClassShiftPushed(t *testing.T) {
	sec := int64(time.Second)
	s := &Settings{Limit: 100, Period: time.Second, TTL: 2 * time.Second}
	var b Bucket
	if a, _ := b.ReportPush(s, "s1", sh, 0, 80, time.Second, everyone, nil); a.Share != 100 {
		t.Fatalf("alone: %+v", a)
	}
	a, pushes := b.ReportPush(s, "c1", cp, sec/2, 60, time.Second, everyone, nil)
	if a.Share != 0 || len(pushes) != 1 || pushes[0].Share != 40 {
		t.Fatalf("critical got %d, pushes %+v; want 0 until the sheddable client's 40 is delivered", a.Share, pushes)
	}
	if got := deliver(&b, s, sec/2, "c1", a, pushes); got["c1"].Share != 60 || got["s1"].Share != 40 {
		t.Fatalf("delivered: %+v, want critical 60 and sheddable 40", got)
	}
	if c := b.Committed(sec / 2); c != 100 {
		t.Fatalf("committed %d", c)
	}
	// An unknown class is the default, Critical.
	b.ReportClass(s, "x", sluice.Criticality(200), 2*sec, 1, time.Second)
	if got := b.Clients["x"].Class; got != sluice.Critical {
		t.Fatalf("unknown class recorded as %v", got)
	}
}

func TestEncodeClientClass(t *testing.T) {
	c := &Client{History: []Sample{{Count: 1, Elapsed: 2}}, Seen: 9, Held: []Assignment{{Share: 5, Expires: 6}}}
	v1 := AppendClient(nil, c)
	if v1[0] != 1 {
		t.Fatalf("a client of the default class is written as version %d, want 1", v1[0])
	}
	for _, class := range sluice.Criticalities() {
		c.Class = class
		b := AppendClient(nil, c)
		got, err := DecodeClient(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c) {
			t.Fatalf("%v: round trip: %+v %v", class, got, err)
		}
		for i := range b {
			if _, err := DecodeClient(b[:i]); err == nil {
				t.Fatalf("%v: truncated at %d decoded", class, i)
			}
		}
	}
	c.Class = sluice.Sheddable
	b := AppendClient(nil, c)
	b[1+1+1] = 9 // version, Seen (one byte), Left, then the class
	if _, err := DecodeClient(b); err == nil {
		t.Fatal("unknown class decoded")
	}
	if _, err := DecodeClient(append([]byte{3}, v1[1:]...)); err == nil {
		t.Fatal("unknown version decoded")
	}
}
