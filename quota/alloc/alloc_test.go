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
// random instants, leaving and coming back, every client local and every assignment
// delivered at once, and checks after every report that the shares clients may be spending
// sum to at most the limit (holds only decrease between reports, so the instant of a report
// is the worst one), and that the reporter gets its target, less at most the others'
// deadbands, once its shrinking neighbours' assignments are delivered, when no client that
// is gone or idle still holds a share (and the targets fit the limit: under Static they may
// not). With classes, each client is of a criticality class and the heavy demand moves from
// class to class every 1000 steps.
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
				a, pushes := b.ReportPush(s, id, class, now, count, time.Duration(r.IntN(int(2*time.Second))), everyone, nil)
				if lasts := now + int64(s.TTL+DefaultGrace); a.Share < 0 || a.Expires < lasts || a.Expires > lasts+int64(time.Millisecond) {
					t.Fatalf("bad assignment %+v", a)
				}
				if c := b.Committed(now); c > s.Limit {
					t.Fatalf("%v (classes %v): step %d: committed %d > limit %d before delivery", pol, classes, i, c, s.Limit)
				}
				got := deliver(&b, s, now, id, a, pushes)
				targets := b.Targets(s, now)
				var total int64
				for _, v := range targets {
					total += v
				}
				if lag, stale := b.slack(s, id, now); stale == 0 && total <= s.Limit {
					if target := targets[id]; got[id].Share < target-lag {
						t.Fatalf("%v (classes %v): step %d: reporter got %d, target %d, others' deadbands %d", pol, classes, i, got[id].Share, target, lag)
					}
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

// TestBucketNeverOverWhateverTheDelivery is the property of issue 37 for the whole class of
// delivery orders: clients join, report, change demand, leave (their stream broken while
// they keep spending) and come back at random; every assignment travels on its client's
// stream in order, but the streams deliver at random moments relative to each other, and a
// broken stream loses what it had not delivered. A client spends the newest assignment it
// received until that expires; the server learns a delivery when it happens (Delivered).
// At every step the shares the clients really spend sum to at most the limit, and the
// server's count (Committed) is never below it. With ReleaseOnLeave the bucket frees a
// leaver's share at once, and the sum may exceed the limit by at most the leavers' shares.
func TestBucketNeverOverWhateverTheDelivery(t *testing.T) {
	type sent struct {
		a       Assignment
		pending bool
	}
	for _, release := range []bool{false, true} {
		for seed := uint64(0); seed < 20; seed++ {
			r := rand.New(rand.NewPCG(seed, 37))
			s := &Settings{Limit: 1000, Period: time.Second, TTL: time.Duration(1+r.IntN(3)) * time.Second, ReleaseOnLeave: release}
			var b Bucket
			spends := map[string]Assignment{}   // what each client enforces (received)
			queue := map[string][]sent{}        // each stream's undelivered assignments, in order
			leftWith := map[string]Assignment{} // clients gone, spending their last share
			released := map[string]int64{}      // the newest assignment a client had when it was released
			now := int64(0)
			send := func(id string, a Assignment, pending bool) {
				if _, gone := leftWith[id]; !gone {
					queue[id] = append(queue[id], sent{a, pending})
				}
			}
			for step := 0; step < 3000; step++ {
				now += int64(r.IntN(int(50 * time.Millisecond)))
				id := fmt.Sprint("c", r.IntN(8))
				switch op := r.IntN(10); {
				case op < 4: // a stream delivers its oldest assignment
					q := queue[id]
					if len(q) == 0 {
						continue
					}
					m := q[0]
					queue[id] = q[1:]
					if m.a.Expires > spends[id].Expires {
						spends[id] = m.a
					}
					for _, p := range b.Delivered(s, id, m.a, now, everyone, nil) {
						send(p.Client, p.Assignment, p.Pending)
					}
				case op < 5: // the stream breaks: the client lives on with what it received
					if _, gone := leftWith[id]; gone || b.Clients[id] == nil {
						continue
					}
					leftWith[id] = spends[id]
					delete(queue, id)
					if release {
						if h := b.Clients[id].Held; len(h) > 0 {
							released[id] = h[len(h)-1].Expires
						}
						b.Release(id)
					} else {
						b.Leave(id)
					}
				default: // a report (a client that left comes back on a new stream)
					if prev, gone := leftWith[id]; gone {
						delete(leftWith, id)
						spends[id] = prev
					}
					a, pushes := b.ReportPush(s, id, sluice.Critical, now, float64(r.IntN(2000)), time.Second, everyone, nil)
					send(id, a, b.Pending(id, now))
					for _, p := range pushes {
						send(p.Client, p.Assignment, p.Pending)
					}
				}
				var spent, leavers int64
				for cid, a := range spends {
					if a.Expires > now {
						spent += a.Share
						if a.Expires <= released[cid] { // handed out before the release
							leavers += a.Share
						}
					}
				}
				bound := s.Limit
				if release {
					bound += leavers
				}
				if spent > bound {
					t.Fatalf("release %v seed %d step %d: clients spend %d > %d (limit %d): %v", release, seed, step, spent, bound, s.Limit, spends)
				}
				if c := b.Committed(now); !release && c < spent {
					t.Fatalf("seed %d step %d: the bucket counts %d, the clients spend %d", seed, step, c, spent)
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
				a, pushes := b.ReportPush(s, id, sluice.Critical, now, demands[i], time.Duration(interval), everyone, nil)
				for cid, a := range deliver(&b, s, now, id, a, pushes) {
					got[cid] = a.Share
				}
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

func TestBucketNewcomerPushes(t *testing.T) {
	s := &Settings{Limit: 100, Period: time.Second, TTL: 30 * time.Second}
	var b Bucket
	sec := int64(time.Second)
	if a, _ := b.ReportPush(s, "a", sluice.Critical, 0, 500, time.Second, everyone, nil); a.Share != 100 {
		t.Fatalf("alone: %+v", a)
	}
	// b arrives while a holds the whole limit for 30 s: a is pushed its half, and b gets
	// nothing until that push is delivered, then its half.
	a, pushes := b.ReportPush(s, "b", sluice.Critical, sec/2, 500, time.Second, everyone, nil)
	if a.Share != 0 || len(pushes) != 1 || pushes[0].Client != "a" || pushes[0].Share != 50 || !pushes[0].Pending {
		t.Fatalf("newcomer got %d, pushes %+v; want 0 and a pushed 50, pending", a.Share, pushes)
	}
	if c := b.Committed(sec / 2); c != 100 {
		t.Fatalf("committed %d before the delivery", c)
	}
	grown := b.Delivered(s, "a", pushes[0].Assignment, sec/2, everyone, nil)
	if len(grown) != 1 || grown[0].Client != "b" || grown[0].Share != 50 || grown[0].Pending {
		t.Fatalf("after a's shrink was delivered: pushes %+v, want b pushed 50", grown)
	}
	if c := b.Committed(sec / 2); c != 100 {
		t.Fatalf("committed %d", c)
	}
	// Delivering it again, or an unknown assignment, changes nothing.
	if again := b.Delivered(s, "a", pushes[0].Assignment, sec/2, everyone, nil); len(again) != 0 {
		t.Fatalf("a second delivery pushed %+v", again)
	}
	// Cold start: c and d join (no history: they ask for the whole limit) and get a fair
	// share each once the shrinks are delivered.
	reportDelivered(&b, s, "c", sec, 0, 0)
	got := reportDelivered(&b, s, "d", sec, 0, 0)
	if got["d"].Share < 24 || b.Committed(sec) > 100 {
		t.Fatalf("fourth newcomer got %d, committed %d", got["d"].Share, b.Committed(sec))
	}
	// Without local clients nothing is pushed: a newcomer gets what is free, the others
	// learn their shares at their next report, and the newcomer its share at its next one
	// after theirs are delivered.
	var r Bucket
	r.Report(s, "a", 0, 500, time.Second)
	if a := r.Report(s, "b", sec/2, 500, time.Second); a.Share != 0 {
		t.Fatalf("remote newcomer got %d while a holds the limit, want 0", a.Share)
	}
	a = r.Report(s, "a", sec, 500, time.Second)
	if a.Share != 50 || !r.Pending("a", sec) {
		t.Fatalf("a at its next report: %d (pending %v), want 50, pending", a.Share, r.Pending("a", sec))
	}
	r.Delivered(s, "a", a, sec, nil, nil)
	if a := r.Report(s, "b", 2*sec, 500, time.Second); a.Share != 50 {
		t.Fatalf("b at its next report: %d, want 50", a.Share)
	}
	if c := r.Committed(2 * sec); c != 100 {
		t.Fatalf("committed %d", c)
	}
}

// TestBucketWaitersShareFreedCapacity: a client idle (past IdleAfter) still holds its share
// until it expires (its TTL and the grace); the clients waiting for it all get their share
// at the first recomputation after it has expired, whoever reports.
func TestBucketWaitersShareFreedCapacity(t *testing.T) {
	s := &Settings{Limit: 90, Period: time.Second, TTL: 2 * time.Second, IdleAfter: time.Second / 2}
	var b Bucket
	sec := int64(time.Second)
	b.Report(s, "silent", 0, 500, time.Second)
	w1, _ := b.ReportPush(s, "w1", sluice.Critical, 19*sec/10, 500, time.Second, everyone, nil)
	w2, _ := b.ReportPush(s, "w2", sluice.Critical, 19*sec/10, 500, time.Second, everyone, nil)
	if w1.Share != 0 || w2.Share != 0 {
		t.Fatalf("while the idle client's 90 is live: %d, %d", w1.Share, w2.Share)
	}
	got := map[string]int64{}
	for cid, a := range reportDelivered(&b, s, "w3", 2*sec+int64(DefaultGrace), 500, time.Second) {
		got[cid] = a.Share
	}
	if got["w1"] != 30 || got["w2"] != 30 || got["w3"] != 30 {
		t.Fatalf("after the idle client's share expired: %v, want 30 each", got)
	}
}

// TestBucketSilentClientFreed: a client that stops reporting frees its share one TTL after
// its last report (its demand no longer counts, its assignment has expired).
func TestBucketSilentClientFreed(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, ttl := range []time.Duration{time.Second, 30 * time.Second} {
		s := &Settings{Limit: 100, Period: time.Second, TTL: ttl}
		var b Bucket
		now := int64(0)
		for ; now < 2*int64(ttl); now += 200 * ms {
			b.ReportPush(s, "silent", sluice.Critical, now, 100, 200*time.Millisecond, everyone, nil)
			b.ReportPush(s, "busy", sluice.Critical, now, 100, 200*time.Millisecond, everyone, nil)
		}
		last := now - 200*ms
		for ; ; now += 200 * ms {
			if a, _ := b.ReportPush(s, "busy", sluice.Critical, now, 100, 200*time.Millisecond, everyone, nil); a.Share == 100 {
				break
			}
		}
		if took := time.Duration(now - last); took > ttl+200*time.Millisecond {
			t.Fatalf("TTL %v: the silent client's share freed %v after its last report, want at most TTL + interval", ttl, took)
		}
	}
}

// TestBucketLeaverHeldUntilExpiry: a client whose stream closed may live on and spend its
// last share until it expires, so the share returns to the pool then, not before; with
// ReleaseOnLeave it is free at the next recomputation. Rebalance hands it out at expiry
// without waiting for a report.
func TestBucketLeaverHeldUntilExpiry(t *testing.T) {
	sec := int64(time.Second)
	for _, release := range []bool{false, true} {
		s := &Settings{Limit: 100, Period: time.Second, TTL: 30 * time.Second, ReleaseOnLeave: release}
		var b Bucket
		b.Report(s, "a", 0, 500, time.Second)
		reportDelivered(&b, s, "b", 0, 500, time.Second)
		if release {
			b.Release("a")
		} else {
			b.Leave("a")
		}
		a, _ := b.ReportPush(s, "b", sluice.Critical, sec/5, 500, time.Second, everyone, nil)
		switch {
		case release && a.Share != 100:
			t.Fatalf("released: b got %d after a left, want the whole limit", a.Share)
		case !release && a.Share != 50:
			t.Fatalf("held: b got %d while a's share lives, want 50", a.Share)
		}
		if release {
			continue
		}
		expiry := b.Clients["a"].Held[0].Expires
		if expiry < 30*sec {
			t.Fatalf("a's share expires at %d, before its TTL", expiry)
		}
		if pushes := b.Rebalance(s, expiry-1, everyone, nil); len(pushes) != 0 {
			t.Fatalf("before a's share expired: %+v", pushes)
		}
		pushes := b.Rebalance(s, expiry, everyone, nil)
		if len(pushes) != 1 || pushes[0].Client != "b" || pushes[0].Share != 100 {
			t.Fatalf("at a's expiry: pushes %+v, want b pushed the whole limit", pushes)
		}
		if b.Clients["a"] != nil {
			t.Fatal("the leaver is still recorded after its share expired")
		}
	}
}

// deliver delivers the reporter's assignment a and the pushes, and the pushes their
// deliveries make (DeliverNow), and returns the newest assignment each client got.
func deliver(b *Bucket, s *Settings, now int64, id string, a Assignment, pushes []Push) map[string]Assignment {
	got := map[string]Assignment{}
	for _, p := range b.DeliverNow(s, now, id, a, pushes, everyone) {
		got[p.Client] = p.Assignment
	}
	return got
}

// reportDelivered is ReportPush of client id (class Critical), every assignment it makes
// delivered (see deliver).
func reportDelivered(b *Bucket, s *Settings, id string, now int64, count float64, elapsed time.Duration) map[string]Assignment {
	a, pushes := b.ReportPush(s, id, sluice.Critical, now, count, elapsed, everyone, nil)
	return deliver(b, s, now, id, a, pushes)
}

// everyone is the local of a single replica: every client is pushed.
func everyone(string) bool { return true }

// slack returns, at now, the deadbands of the active clients other than id (what they may
// hold above their targets without a push) and the shares held by clients gone or idle.
func (b *Bucket) slack(s *Settings, id string, now int64) (lag, stale int64) {
	for cid, c := range b.Clients {
		switch {
		case !b.active(s, c, now):
			stale += c.holds(now)
		case cid != id:
			lag += deadband(c.holds(now))
		}
	}
	return lag, stale
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

// TestDefaultTTLWholeSeconds: the default TTL (twice the period, 1 s to 1 min) is sent in
// whole seconds, which older Envoys read alone.
func TestDefaultTTLWholeSeconds(t *testing.T) {
	for period, want := range map[time.Duration]time.Duration{
		100 * time.Millisecond: time.Second, 750 * time.Millisecond: 2 * time.Second,
		1250 * time.Millisecond: 3 * time.Second, time.Hour: time.Minute,
	} {
		s := &Settings{Limit: 1, Period: period}
		if got := s.EffectiveTTL(); got != want {
			t.Errorf("period %v: TTL %v, want %v", period, got, want)
		}
	}
}
