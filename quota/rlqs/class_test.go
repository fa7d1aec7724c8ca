package rlqs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota/rlqs"
)

const classRules = `domain: envoy
quota_buckets:
  - bucket_id: {name: api}
    requests_per_unit: 1000
    unit: second
    assignment_ttl: 1s
    criticality_key: criticality
`

// classDemand is one bucket id a fake Envoy reports: the api bucket of a class, and the
// requests per second it wants.
type classDemand struct {
	class  string
	demand float64
}

func classBucket(class string) map[string]string {
	return map[string]string{"name": "api", "criticality": class}
}

// classFleet is fake Envoys each reporting one or more classes of the api bucket on its one
// stream.
type classFleet struct {
	t       *testing.T
	envoys  []*fakeEnvoy
	demands [][]classDemand
	shares  [][]int64
}

func newClassFleet(t *testing.T, demands [][]classDemand, conns ...*grpc.ClientConn) *classFleet {
	f := &classFleet{t: t, demands: demands}
	for i, ds := range demands {
		f.envoys = append(f.envoys, newFakeEnvoy(t, conns[i%len(conns)], "envoy"))
		f.shares = append(f.shares, make([]int64, len(ds)))
	}
	return f
}

// round makes every Envoy report one interval of each class's demand (allowed up to its
// share, the rest denied) in one message, and records each one's current share (answers and
// pushes).
func (f *classFleet) round() {
	f.t.Helper()
	for i, e := range f.envoys {
		var us []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
		for j, d := range f.demands[i] {
			want := uint64(d.demand)
			allowed := min(want, uint64(max(f.shares[i][j], 0)))
			us = append(us, usage(classBucket(d.class), interval, allowed, want-allowed))
		}
		r := e.report(us...)
		if len(r.BucketAction) != len(us) {
			f.t.Fatalf("envoy %d: %d actions for %d buckets", i, len(r.BucketAction), len(us))
		}
	}
	for i, e := range f.envoys { // answers and pushes
		for j, d := range f.demands[i] {
			f.shares[i][j], _ = e.latest(classBucket(d.class))
		}
	}
}

// want returns the split that serves classes first: each class's demand in order while the
// limit lasts, the first class that does not fit max-min fair, nothing after it (what
// alloc computes, recomputed here from the definition).
func (f *classFleet) want(limit int64, order []string) [][]int64 {
	out := make([][]int64, len(f.demands))
	for i := range out {
		out[i] = make([]int64, len(f.demands[i]))
	}
	left := limit
	for _, class := range order {
		var ds []float64
		var at [][2]int
		var sum float64
		for i, cd := range f.demands {
			for j, d := range cd {
				if strings.EqualFold(d.class, class) {
					ds, at = append(ds, d.demand), append(at, [2]int{i, j})
					sum += d.demand
				}
			}
		}
		budget := min(left, int64(sum))
		for k, s := range maxMin(budget, ds) {
			out[at[k][0]][at[k][1]] = s
		}
		left -= budget
	}
	return out
}

func (f *classFleet) sum() (s int64) {
	for _, ss := range f.shares {
		for _, v := range ss {
			s += v
		}
	}
	return s
}

// overDemand: 1400 requests per second against 1000: critical_plus (500, one Envoy
// reporting it next to its sheddable traffic) is served whole, sheddable shares the 500
// left, max-min.
var overDemand = [][]classDemand{
	{{"CRITICAL_PLUS", 300}},
	{{"critical_plus", 200}, {"sheddable", 300}},
	{{"SHEDDABLE", 200}},
	{{"sheddable", 400}},
}

// checkClassesFirst runs two rounds and checks the shares against the classes-first split.
func (f *classFleet) checkClassesFirst(clock interface{ Advance(time.Duration) }) {
	f.t.Helper()
	f.round()
	clock.Advance(interval)
	f.round()
	want := f.want(1000, []string{"CRITICAL_PLUS", "SHEDDABLE"})
	for i := range f.shares {
		if !within5(f.shares[i], want[i]) {
			f.t.Fatalf("after two rounds: shares %v, want %v", f.shares, want)
		}
	}
	if s := f.sum(); s > 1000 {
		f.t.Fatalf("shares %v sum to %d > 1000", f.shares, s)
	}
}

func TestCriticalClassesServedFirst(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, classRules) }, Clock: clock})
	f := newClassFleet(t, overDemand, serve(t, svc))
	f.checkClassesFirst(clock)
	// critical_plus gets its whole demand, sheddable 500 between three
	if f.shares[0][0] != 300 || f.shares[1][0] != 200 || f.shares[1][1]+f.shares[2][0]+f.shares[3][0] != 500 {
		t.Fatalf("shares %v", f.shares)
	}
}

// TestClassesFitGetTheirDemand: when the demands fit, every class gets at least its demand
// (the surplus is spread as headroom, as without classes).
func TestClassesFitGetTheirDemand(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, classRules) }, Clock: clock})
	demands := [][]classDemand{{{"CRITICAL_PLUS", 300}}, {{"CRITICAL_PLUS", 100}, {"SHEDDABLE", 200}}, {{"SHEDDABLE", 250}}}
	f := newClassFleet(t, demands, serve(t, svc))
	f.round()
	clock.Advance(interval)
	f.round()
	for i, ds := range demands {
		for j, d := range ds {
			if float64(f.shares[i][j]) < d.demand {
				t.Fatalf("demands fit, shares %v: envoy %d %s below its demand %v", f.shares, i, d.class, d.demand)
			}
		}
	}
	if s := f.sum(); s != 1000 {
		t.Fatalf("shares %v sum to %d, want the whole limit as headroom", f.shares, s)
	}
}

// TestClassShiftNeverOvercommits: sheddable Envoys hold the whole limit; critical demand
// arrives on other Envoys. Once the pushes are delivered the fleet never holds more than
// the limit (each client's current assignment); critical gets its whole demand within two
// reports.
func TestClassShiftNeverOvercommits(t *testing.T) {
	clock := newClock()
	body := strings.Replace(classRules, "assignment_ttl: 1s", "assignment_ttl: 2s", 1)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, body) }, Clock: clock})
	conn := serve(t, svc)
	holds := newHoldings(t, clock, 1000)
	type member struct {
		e      *fakeEnvoy
		name   string
		class  string
		demand uint64
	}
	var fleet []member
	last := map[string]int64{}
	round := func() {
		for _, m := range fleet {
			m.e.report(usage(classBucket(m.class), interval, min(m.demand, uint64(max(last[m.name], 0))), m.demand-min(m.demand, uint64(max(last[m.name], 0)))))
			for _, o := range fleet {
				last[o.name] = holds.add(o.name, o.e, classBucket(o.class))
			}
			holds.check()
		}
	}
	for i, name := range []string{"s0", "s1", "s2"} {
		fleet = append(fleet, member{newFakeEnvoy(t, conn, "envoy"), name, "SHEDDABLE", uint64(400 + 100*i)})
	}
	for i := 0; i < 3; i++ {
		round()
		clock.Advance(interval)
	}
	if last["s0"]+last["s1"]+last["s2"] != 1000 {
		t.Fatalf("sheddable alone: %v, want the whole limit", last)
	}
	fleet = append(fleet, member{newFakeEnvoy(t, conn, "envoy"), "c0", "CRITICAL", 500}, member{newFakeEnvoy(t, conn, "envoy"), "c1", "CRITICAL_PLUS", 200})
	for i := 0; i < 2; i++ {
		round()
		clock.Advance(interval / 2)
		holds.check()
		clock.Advance(interval / 2)
	}
	if last["c0"] != 500 || last["c1"] != 200 || last["s0"]+last["s1"]+last["s2"] != 300 {
		t.Fatalf("after the shift: %v, want critical 500 and 200, sheddable 300 between them", last)
	}
}

// TestUnknownClassIsCritical: a criticality entry that does not parse is served as CRITICAL,
// not refused; a bucket id without the entry is CRITICAL too, and shares the bucket.
func TestUnknownClassIsCritical(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, classRules) }, Clock: clock})
	demands := [][]classDemand{{{"urgent", 600}}, {{"SHEDDABLE", 600}}, {{"CRITICAL", 300}}}
	f := newClassFleet(t, demands, serve(t, svc))
	f.round()
	clock.Advance(interval)
	f.round()
	if f.shares[0][0] != 600 || f.shares[2][0] != 300 || f.shares[1][0] != 100 {
		t.Fatalf("shares %v, want the unknown class served as CRITICAL (600, 300), sheddable 100", f.shares)
	}
	e := newFakeEnvoy(t, serve(t, svc), "envoy")
	if r := e.report(usage(map[string]string{"name": "api"}, interval, 10, 0)); len(r.BucketAction) != 1 {
		t.Fatalf("without the entry: %v", r)
	}
}

// TestTwoReplicasServeClassesFirst: the fleet of TestCriticalClassesServedFirst spread over
// two replicas sharing one Redis gets the same split: the class is part of what they share.
func TestTwoReplicasServeClassesFirst(t *testing.T) {
	clock := newClock()
	rc, prefix, newReplica := replicas(t, clock, classRules)
	f := newClassFleet(t, overDemand, serve(t, newReplica()), serve(t, newReplica()))
	f.checkClassesFirst(clock)
	keys, err := rc.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v %v, want one bucket hash for every class", keys, err)
	}
	if n := rc.HLen(context.Background(), keys[0]).Val(); n != 5 {
		t.Fatalf("%d client records, want 5 (one per Envoy and class)", n)
	}
}
