package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/config"
)

const testLimit, testPeriod = 10, time.Minute

// loadRules loads testdata/rules.yaml with the given default algorithm.
func loadRules(t testing.TB, a sluice.Algorithm) *config.Config {
	t.Helper()
	c, err := config.LoadWith("testdata/rules.yaml", config.Options{DefaultAlgorithm: a})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// expected is what a test computes on its own of one algorithm on the test traffic.
type expected struct {
	denials       map[string]int64 // per client, by the algorithm's own state machine
	needless      int64            // denials the exact sliding log of its admissions would not make
	violations    int64            // admissions it would not make
	overAdmission int64            // the most units admitted in a trailing minute, any client
	peak          map[string]int64 // units asked for in a trailing minute, at most, per client
}

// expect decides the traffic with algorithm a's pure state machine, one state per client,
// and judges it with a naive sliding log (every admitted instant kept): an independent path
// from the replay's engine, store and reference.
func expect(evs []event, a sluice.Algorithm) expected {
	rule := sluice.Rule{Algorithm: a, Limit: testLimit, Period: testPeriod}
	p := algorithm.Compile(rule)
	states := map[string]algorithm.State{}
	admitted := map[string][]int64{}
	offered := map[string][]int64{}
	count := func(ts []int64, now int64) (n int64) {
		for _, t := range ts {
			if t > now-int64(testPeriod) && t <= now {
				n++
			}
		}
		return n
	}
	x := expected{denials: map[string]int64{}, peak: map[string]int64{}}
	for _, e := range evs {
		now := e.at.UnixNano()
		st := states[e.client]
		if st == nil {
			st = algorithm.New(a)
			states[e.client] = st
		}
		offered[e.client] = append(offered[e.client], now)
		x.peak[e.client] = max(x.peak[e.client], count(offered[e.client], now))
		before := count(admitted[e.client], now)
		if st.Take(now, &p, 1, 0).Allowed {
			admitted[e.client] = append(admitted[e.client], now)
			x.overAdmission = max(x.overAdmission, before+1)
			if before+1 > testLimit {
				x.violations++
			}
			continue
		}
		x.denials[e.client]++
		if before+1 <= testLimit {
			x.needless++
		}
	}
	return x
}

// TestReplayFindsTheReferenceDenials: logs of the known traffic in every format (one of
// them gzipped) replay to exactly the denials each algorithm's own state machine makes, per
// client; the sliding log's are exactly the exact reference's (no needless denial, no
// violation, never over the limit), and every other algorithm stays within its documented
// bound (docs/ALGORITHMS.md: at most 2 x Limit in any period; the fixed window reaches it at
// the window edge); the replay's reference agrees with the test's own.
func TestReplayFindsTheReferenceDenials(t *testing.T) {
	evs := testTraffic()
	dir := t.TempDir()
	for fi, f := range testFormats {
		path := writeLog(t, dir, f, evs, fi == 0)
		format, err := ParseFormat(f.spec, f.fields)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		for _, a := range sluice.Algorithms() {
			if raceEnabled && a != sluice.AlgorithmSlidingLog && f.name != "nginx" {
				continue // under the race detector: every format once, every algorithm once
			}
			t.Run(f.name+"/"+a.String(), func(t *testing.T) {
				in, err := FileInput(path)
				if err != nil {
					t.Fatal(err)
				}
				rep, err := Run(context.Background(), Config{Rules: loadRules(t, a), Format: format, Top: 100}, in)
				if err != nil {
					t.Fatal(err)
				}
				checkReport(t, rep, evs, a)
			})
		}
	}
}

func checkReport(t *testing.T, rep *Report, evs []event, a sluice.Algorithm) {
	t.Helper()
	if rep.Requests != int64(len(evs)) || rep.Malformed.Count != 0 || rep.OutOfOrder != 0 {
		t.Fatalf("read %d requests (%d malformed, %d out of order), want %d", rep.Requests, rep.Malformed.Count, rep.OutOfOrder, len(evs))
	}
	if len(rep.Rules) != 1 {
		t.Fatalf("%d rules in the report, want 1", len(rep.Rules))
	}
	r := rep.Rules[0]
	x := expect(evs, a)
	t.Logf("%s: denials %d exact %d needless %d violations %d over %v clients %d p50 %d p90 %d p99 %d peak %d", a, r.Denials, r.ExactDenials, r.NeedlessDenials, r.ExactViolations, r.OverAdmission, r.Clients, r.P50, r.P90, r.P99, r.Peak)
	var want int64
	for _, n := range x.denials {
		want += n
	}
	if r.Denials != want || rep.Denied != want {
		t.Errorf("denials: rule %d, requests %d; the algorithm's own: %d", r.Denials, rep.Denied, want)
	}
	got := map[string]int64{}
	for _, c := range r.Top {
		got[strings.TrimPrefix(c.Client, "remote_address=")] = c.Denials
	}
	for client, n := range x.denials {
		if got[client] != n {
			t.Errorf("client %s: %d denials, the algorithm's own: %d", client, got[client], n)
		}
	}
	if r.NeedlessDenials != x.needless || r.ExactViolations != x.violations || r.OverAdmission != float64(x.overAdmission)/testLimit {
		t.Errorf("against the exact reference: needless %d, violations %d, over-admission %v; the test's own: %d, %d, %v",
			r.NeedlessDenials, r.ExactViolations, r.OverAdmission, x.needless, x.violations, float64(x.overAdmission)/testLimit)
	}
	switch a {
	case sluice.AlgorithmSlidingLog:
		if r.NeedlessDenials != 0 || r.ExactViolations != 0 || r.OverAdmission != 1 || r.ExactDenials != r.Denials {
			t.Errorf("sliding log: %d needless denials, %d violations, over-admission %v: want exactly the reference's", r.NeedlessDenials, r.ExactViolations, r.OverAdmission)
		}
	case sluice.AlgorithmFixedWindow:
		if r.OverAdmission != 2 || r.NeedlessDenials != 0 {
			t.Errorf("fixed window: over-admission %v (the burst at the edge: want the documented 2), %d needless denials", r.OverAdmission, r.NeedlessDenials)
		}
	default:
		if r.OverAdmission > 2 {
			t.Errorf("%s: over-admission %v, above the documented bound of 2 x Limit", a, r.OverAdmission)
		}
	}
	peaks := histogram{}
	for _, p := range x.peak {
		peaks.add(p, 1)
	}
	if r.Clients != 22 || r.Peak != 120 || r.P50 != peaks.quantile(.5) || r.P90 != peaks.quantile(.9) || r.P99 != 120 {
		t.Errorf("clients %d, rates peak %d p50 %d p90 %d p99 %d; want 22 clients, peak 120, p50 %d, p90 %d, p99 120",
			r.Clients, r.Peak, r.P50, r.P90, r.P99, peaks.quantile(.5), peaks.quantile(.9))
	}
	for _, c := range r.Top {
		if c.Peak != x.peak[strings.TrimPrefix(c.Client, "remote_address=")] {
			t.Errorf("%s: peak %d, want %d", c.Client, c.Peak, x.peak[c.Client])
		}
	}
	if first := r.FirstDenial; want > 0 && (first == nil || first.Before(testStart)) {
		t.Errorf("first denial %v", first)
	}
}

// TestReplayMalformedLines: a malformed line is counted with its line number and skipped;
// with Strict it stops the replay, naming the line.
func TestReplayMalformedLines(t *testing.T) {
	evs := testTraffic()[:200]
	for _, f := range testFormats {
		t.Run(f.name, func(t *testing.T) {
			path := writeLog(t, t.TempDir(), f, evs, false, 0, 50, 199)
			format, err := ParseFormat(f.spec, f.fields)
			if err != nil {
				t.Fatal(err)
			}
			in, _ := FileInput(path)
			rep, err := Run(context.Background(), Config{Rules: loadRules(t, sluice.AlgorithmSlidingLog), Format: format}, in)
			if err != nil {
				t.Fatal(err)
			}
			head := int64(0)
			if f.header != "" {
				head = 1
			}
			want := []int64{head + 1, head + 52, head + 202} // each bad line comes before event k, after the k lines and the bad ones before it
			if rep.Malformed.Count != 3 || len(rep.Malformed.Lines) != 3 || rep.Requests != 200 {
				t.Fatalf("malformed %+v, %d requests", rep.Malformed, rep.Requests)
			}
			for i, l := range rep.Malformed.Lines {
				if l.Line != want[i] {
					t.Errorf("malformed line %d: %d, want %d (%s)", i, l.Line, want[i], l.Reason)
				}
			}
			in, _ = FileInput(path)
			_, err = Run(context.Background(), Config{Rules: loadRules(t, sluice.AlgorithmSlidingLog), Format: format, Strict: true}, in)
			var le *LineError
			if !errors.As(err, &le) || le.Line != want[0] {
				t.Errorf("strict: %v, want the error of line %d", err, want[0])
			}
		})
	}
}

// TestReplayOutOfOrder: a line logged earlier than the one before is decided at the latest
// instant seen, and counted.
func TestReplayOutOfOrder(t *testing.T) {
	evs := testTraffic()[:100]
	evs[50].at = evs[50].at.Add(-3 * time.Second)
	path := writeLog(t, t.TempDir(), testFormats[2], evs, false)
	format, _ := ParseFormat("combined", "")
	in, _ := FileInput(path)
	rep, err := Run(context.Background(), Config{Rules: loadRules(t, sluice.AlgorithmSlidingLog), Format: format}, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OutOfOrder != 1 || rep.MaxLag < 3*time.Second || rep.Requests != 100 {
		t.Errorf("out of order %d, lag %v, %d requests", rep.OutOfOrder, rep.MaxLag, rep.Requests)
	}
}

// TestReplayHashesValues: without telemetry: raw, a client's value is a keyed hash in every
// output, never as logged.
func TestReplayHashesValues(t *testing.T) {
	evs := testTraffic()
	path := writeLog(t, t.TempDir(), testFormats[2], evs, false)
	rules, err := config.Load("testdata/hashed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	format, _ := ParseFormat("combined", "")
	in, _ := FileInput(path)
	rep, err := Run(context.Background(), Config{Rules: rules, Format: format}, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var b strings.Builder
		if err := WriteTable(&b, rep, f); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "10.9.9.9") || !strings.Contains(b.String(), "hash:") {
			t.Errorf("%s: the scraper's address is shown raw, or nothing hashed:\n%s", f, b.String())
		}
	}
	fmt.Fprint(discard{}, rep.Rules[0].Top)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
