package simulate_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/simulate"
)

func latencyRows(t *testing.T, d time.Duration) map[string]map[string]simulate.LatencyRow {
	t.Helper()
	rows, err := simulate.RunLatency(context.Background(), d, 1)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]map[string]simulate.LatencyRow{}
	for _, r := range rows {
		if by[r.Limit] == nil {
			by[r.Limit] = map[string]simulate.LatencyRow{}
		}
		by[r.Limit][r.Phase] = r
	}
	if len(rows) != len(simulate.LatencyLimits)*len(simulate.LatencyPhases) {
		t.Fatalf("%d rows", len(rows))
	}
	return by
}

// Issue 24 item 4: in the latency-spike scenario, a rate limit alone lets the backend's queue
// grow for the whole spike (latency in seconds), the fixed in-flight limit holds the backend
// at its workers (no queue, latency the slow service time) and admits what the slow backend
// can serve, and the adaptive limit cuts itself during the spike, keeps the p99 latency to a
// fraction of the rate limit's, and grows back after it. (It does not hold the backend at 40:
// as the spike lasts, the long average takes the slow latency as the new normal and the
// limit grows again, as Gradient2's does.)
func TestLatencySpike(t *testing.T) {
	by := latencyRows(t, 60*time.Second)
	rate, fixed, adapt := by["rate_limit_only"], by["max_in_flight_40"], by["adaptive"]
	for _, ph := range simulate.LatencyPhases {
		if rate[ph].Admitted != rate[ph].Offered {
			t.Errorf("rate limit alone, %s: admitted %d of %d (the rate limit is above the offered rate)", ph, rate[ph].Admitted, rate[ph].Offered)
		}
		if fixed[ph].MaxInFlight > 40 || fixed[ph].MaxQueued != 0 {
			t.Errorf("max_in_flight_40, %s: %d in flight, %d queued", ph, fixed[ph].MaxInFlight, fixed[ph].MaxQueued)
		}
	}
	if q := rate["spike"].MaxQueued; q < 3000 {
		t.Errorf("rate limit alone: at most %d queued during the spike, want thousands (240/s for 20 s)", q)
	}
	if p := rate["spike"].P99; p < 10*time.Second {
		t.Errorf("rate limit alone: p99 %v during the spike, want seconds", p)
	}
	// the slow backend serves 40/0.25 s = 160/s: 3,200 over the 20 s spike
	if a := fixed["spike"].Admitted; a < 3000 || a > 3300 {
		t.Errorf("max_in_flight_40: admitted %d during the spike, want about 3,200", a)
	}
	if p := fixed["spike"].P99; p != 250*time.Millisecond {
		t.Errorf("max_in_flight_40: p99 %v during the spike, want the slow service time 250ms", p)
	}
	if adapt["spike"].LimitMin >= adapt["before"].LimitMin || adapt["spike"].P99 > rate["spike"].P99/4 {
		t.Errorf("adaptive: spike %+v, before %+v", adapt["spike"], adapt["before"])
	}
	if adapt["after"].LimitMax < adapt["before"].LimitMax || adapt["after"].P50 != 50*time.Millisecond {
		t.Errorf("adaptive: no recovery after the spike: %+v", adapt["after"])
	}
	var out bytes.Buffer
	if err := simulate.WriteLatencyTable(&out, append([]simulate.LatencyRow{}, rate["spike"])); err != nil || !bytes.Contains(out.Bytes(), []byte("| rate_limit_only | spike |")) {
		t.Errorf("table %q: %v", out.String(), err)
	}
}

// The scenario is deterministic: the same seed gives the same rows.
func TestLatencySpikeDeterministic(t *testing.T) {
	a, b := latencyRows(t, 9*time.Second), latencyRows(t, 9*time.Second)
	for name := range a {
		for ph := range a[name] {
			if a[name][ph] != b[name][ph] {
				t.Errorf("%s %s: %+v then %+v", name, ph, a[name][ph], b[name][ph])
			}
		}
	}
}
