package simulate

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// short shortens the many-client scenarios so the suite stays fast under -race.
func short(s Scenario) time.Duration {
	if s.Name == "many_clients" || s.Name == "cloudflare" {
		return 3 * time.Minute
	}
	return 0
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func rowOf(t *testing.T, res *Result, algorithm, mode string) Row {
	t.Helper()
	for _, r := range res.Rows {
		if r.Algorithm == algorithm && r.Mode == mode {
			return r
		}
	}
	t.Fatalf("no row for %s/%s", algorithm, mode)
	return Row{}
}

func TestWindowMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 200; trial++ {
		period := int64(1 + rng.IntN(50))
		w := Window{Period: period}
		var at, units []int64
		now := int64(0)
		for i := 0; i < 100; i++ {
			now += int64(rng.IntN(10)) // ties and gaps
			if rng.IntN(3) > 0 {
				n := int64(1 + rng.IntN(3))
				w.Add(now, n)
				at, units = append(at, now), append(units, n)
			}
			var want int64
			for j := range at {
				if at[j] > now-period && at[j] <= now {
					want += units[j]
				}
			}
			if got := w.Count(now); got != want {
				t.Fatalf("trial %d: Count(%d) with period %d = %d, brute force %d", trial, now, period, got, want)
			}
		}
	}
}

func TestFixedWindowAdmitsTwiceTheLimitUnderBoundaryAttack(t *testing.T) {
	res := run(t, Config{Scenario: boundary, Seed: 1})
	if got := rowOf(t, res, "fixed_window", "single").OverAdmission; got != 2 {
		t.Errorf("fixed_window over_admission = %v, want exactly 2", got)
	}
	for _, v := range []string{"sliding_log", "sliding_window", "sliding_window_4", "gcra", "token_bucket"} {
		if got := rowOf(t, res, v, "single").OverAdmission; got > 1.01 {
			t.Errorf("%s over_admission under the boundary attack = %v, want about 1", v, got)
		}
	}
}

func TestAnalyticBoundsInEveryScenario(t *testing.T) {
	variants := []Variant{{Algorithm: sluice.AlgorithmSlidingLog}, {Algorithm: sluice.AlgorithmTokenBucket},
		{Algorithm: sluice.AlgorithmGCRA}, {Algorithm: sluice.AlgorithmFixedWindow}}
	for _, sc := range Scenarios() {
		res := run(t, Config{Scenario: sc, Seed: 3, Duration: short(sc), Variants: variants})
		log := rowOf(t, res, "sliding_log", "single")
		if log.OverAdmission > 1 || log.LimitViolations != 0 || log.NeedlessDenials != 0 || log.MeanAbsError != 0 {
			t.Errorf("%s: sliding_log is not exact: %+v", sc.Name, log)
		}
		if log.RateEstimationWrong != 0 {
			t.Errorf("%s: sliding_log rate_estimation_wrong = %v, want 0", sc.Name, log.RateEstimationWrong)
		}
		// Burst + rate x period = 2 x limit.
		for _, b := range []string{"token_bucket", "gcra"} {
			if r := rowOf(t, res, b, "single"); r.OverAdmission > 2 || r.NeedlessDenials < 0 {
				t.Errorf("%s: %s over_admission = %v, above burst + rate x period", sc.Name, b, r.OverAdmission)
			}
		}
		if r := rowOf(t, res, "fixed_window", "single"); r.OverAdmission > 2 || r.NeedlessDenials != 0 {
			t.Errorf("%s: fixed_window over_admission %v (max 2), needless_denials %v (want 0)", sc.Name, r.OverAdmission, r.NeedlessDenials)
		}
	}
}

func TestSyncModeMatchesSingle(t *testing.T) {
	modes := []Mode{Single(), Sync(3, RoundRobin), Sync(3, Skewed), Sync(3, Sticky)}
	res := run(t, Config{Scenario: manyClients, Seed: 2, Duration: time.Minute, Modes: modes})
	for _, r := range res.Rows {
		s := rowOf(t, res, r.Algorithm, "single")
		r.Mode, r.Nodes, r.Routing = s.Mode, s.Nodes, s.Routing
		if strings.Join(r.cells(-1), ",") != strings.Join(s.cells(-1), ",") {
			t.Errorf("sync over one atomic store should decide as single:\n sync   %+v\n single %+v", r, s)
		}
	}
}

func TestDeterministic(t *testing.T) {
	table := func(seed uint64) string {
		modes := []Mode{Single(), Sync(2, Skewed), Async(3, RoundRobin, time.Second)}
		res := run(t, Config{Scenario: bursty, Seed: seed, Duration: 20 * time.Minute, Modes: modes})
		var b bytes.Buffer
		if err := WriteTable(&b, res.Rows, "csv"); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	a, b, c := table(5), table(5), table(6)
	if a != b {
		t.Errorf("same seed, different tables:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("different seeds gave the same table")
	}
}

func TestTraceDefinitions(t *testing.T) {
	for _, sc := range Scenarios() {
		tr, err := sc.Generate(short(sc), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Events) == 0 {
			t.Fatalf("%s: empty trace", sc.Name)
		}
		for i, ev := range tr.Events {
			if ev.At < tr.Start || ev.At >= tr.End || (i > 0 && ev.At < tr.Events[i-1].At) ||
				int(ev.Client) >= tr.Clients || ev.N != 1 {
				t.Fatalf("%s: bad event %d: %+v", sc.Name, i, ev)
			}
		}
	}
	// The boundary attack puts a full limit on each side of the edges at 1m, 4m, 7m...
	tr, _ := boundary.Generate(0, 1)
	if len(tr.Events) != 20*2*100 {
		t.Errorf("boundary: %d events, want 4000", len(tr.Events))
	}
	edge := tr.Start + int64(time.Minute)
	if tr.Events[99].At >= edge || tr.Events[100].At != edge {
		t.Errorf("boundary: events straddle %d wrongly: %d, %d", edge, tr.Events[99].At, tr.Events[100].At)
	}
	// Steady traffic averages 125 requests a minute.
	tr, _ = steady.Generate(0, 1)
	if n := len(tr.Events); n < 7000 || n > 8000 {
		t.Errorf("steady: %d events in an hour, want about 7500", n)
	}
}

func TestWriteTableFormats(t *testing.T) {
	res := run(t, Config{Scenario: boundary, Seed: 1, Duration: 5 * time.Minute,
		Variants: []Variant{{Algorithm: sluice.AlgorithmGCRA}, {Algorithm: sluice.AlgorithmFixedWindow}}})
	for _, f := range Formats {
		var b bytes.Buffer
		if err := WriteTable(&b, res.Rows, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(b.String(), "over_admission") {
			t.Errorf("%s: no over_admission column:\n%s", f, b.String())
		}
	}
	var b bytes.Buffer
	if err := WriteTable(&b, res.Rows, "json"); err != nil || !strings.Contains(b.String(), `"mean_abs_error": null`) {
		t.Errorf("json: gcra's mean_abs_error should be null: %v\n%s", err, b.String())
	}
	if err := WriteTable(&b, res.Rows, "yaml"); err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("yaml: want an error naming format, got %v", err)
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	if _, err := ParseVariants("fixed_window,sliding_window_0"); err == nil || !strings.Contains(err.Error(), "algorithms") {
		t.Errorf("ParseVariants: %v", err)
	}
	if v, err := ParseVariants("sliding_window_12"); err != nil || v[0].Name() != "sliding_window_12" {
		t.Errorf("ParseVariants(sliding_window_12) = %v, %v", v, err)
	}
	if _, err := ParseModes("single,warp", 2, nil); err == nil || !strings.Contains(err.Error(), "modes") {
		t.Errorf("ParseModes: %v", err)
	}
	if _, err := ParseModes("sync", 0, nil); err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Errorf("ParseModes nodes 0: %v", err)
	}
	if _, err := ScenarioByName("nope"); err == nil || !strings.Contains(err.Error(), "scenario") {
		t.Errorf("ScenarioByName: %v", err)
	}
	if _, err := steady.Generate(-time.Second, 1); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("Generate: %v", err)
	}
}

func TestOutageCountsErrors(t *testing.T) {
	m := Sync(2, RoundRobin)
	m.Name = "sync_outage"
	m.Outage = Outage{From: 1.0 / 3, To: 2.0 / 3}
	res := run(t, Config{Scenario: steady, Seed: 1, Duration: 30 * time.Minute, Modes: []Mode{m},
		Variants: []Variant{{Algorithm: sluice.AlgorithmSlidingLog}}})
	r := res.Rows[0]
	if r.Errors < 0.25 || r.Errors > 0.42 {
		t.Errorf("errors = %v, want about a third of the requests", r.Errors)
	}
	if r.OverAdmission > 1 {
		t.Errorf("failing closed cannot over-admit: %v", r.OverAdmission)
	}
}

func TestFallbackKeepsTheGlobalBudget(t *testing.T) {
	modes, err := ParseModes("fallback,fallback_fail_open,fallback_fail_closed", 4, []Routing{RoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, Config{Scenario: flood, Seed: 1, Modes: modes,
		Variants: []Variant{{Algorithm: sluice.AlgorithmSlidingLog}, {Algorithm: sluice.AlgorithmGCRA}}})
	for _, r := range res.Rows {
		if r.Errors != 0 {
			t.Errorf("%s/%s: errors %v, want the fallback to decide", r.Algorithm, r.Mode, r.Errors)
		}
		// Neither switch hands out a fresh budget: the local limiters start each key from
		// the store's last decision, and the outage is written back to the store before the
		// store path resumes. So the sliding log stays within its limit (+1%, the local
		// shares' rounding) over any period, switches included, and GCRA within its burst on
		// top of its rate (2 x, as in sync mode). Failing closed adds nothing to what the
		// store admits, and admits again in the period after the outage: the store path
		// resumed. (Failing over locally, that period may rightly admit nothing: the fleet
		// spent its budget locally during the outage's last period.)
		bound := 1.01
		if r.Algorithm == "gcra" {
			bound = 2
		}
		switch r.Mode {
		case "fallback", "fallback_fail_closed":
			if r.OverAdmission > bound || r.OverAdmissionRecovery > bound {
				t.Errorf("%s/%s: over_admission %v (%v across the switch back), want at most %v",
					r.Algorithm, r.Mode, r.OverAdmission, r.OverAdmissionRecovery, bound)
			}
			if r.Mode == "fallback_fail_closed" && r.OverAdmissionRecovery < 1 {
				t.Errorf("%s/%s: over_admission_recovery %v: the store path did not resume", r.Algorithm, r.Mode, r.OverAdmissionRecovery)
			}
			if r.Mode == "fallback_fail_closed" && r.OverAdmissionOutage != 0 {
				t.Errorf("%s/%s: admitted during the outage", r.Algorithm, r.Mode)
			}
		case "fallback_fail_open":
			if r.OverAdmission < 5 {
				t.Errorf("%s/%s: over_admission %v, failing open under a flood should admit far more", r.Algorithm, r.Mode, r.OverAdmission)
			}
		}
	}
}
