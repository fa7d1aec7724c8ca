package replay

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/simulate"
	"github.com/sluicehq/sluice/store"
)

func replayWith(t *testing.T, a sluice.Algorithm, evs []event, mode simulate.Mode, st func(sluice.Clock) (sluice.Store, io.Closer, error)) RuleReport {
	t.Helper()
	path := writeLog(t, t.TempDir(), testFormats[2], evs, false)
	format, _ := ParseFormat("combined", "")
	in, _ := FileInput(path)
	rep, err := Run(context.Background(), Config{Rules: loadRules(t, a), Format: format, Mode: mode, Store: st, Top: 100}, in)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Rules[0]
}

// TestReplayModes: the mode is the one asked for. Three instances in sync mode on one store
// decide as one; in async mode (local window counters synced every second in virtual time,
// docs/MODES.md) instances see each other's admissions late, so they admit more than one
// instance does, and with sticky routing, each client one instance's, exactly as one. (The
// async bound itself is measured by package simulate and distributed's tests.)
func TestReplayModes(t *testing.T) {
	evs := testTraffic()
	one := replayWith(t, sluice.AlgorithmSlidingLog, evs, simulate.Mode{}, nil)
	three := replayWith(t, sluice.AlgorithmSlidingLog, evs, simulate.Sync(3, simulate.RoundRobin), nil)
	if one.Denials != three.Denials || three.NeedlessDenials != 0 || three.OverAdmission != 1 {
		t.Errorf("sync x3: %d denials (%d needless, over-admission %v), one instance: %d", three.Denials, three.NeedlessDenials, three.OverAdmission, one.Denials)
	}
	const nodes, interval = 4, time.Second
	single := replayWith(t, sluice.AlgorithmSlidingWindow, evs, simulate.Mode{}, nil)
	async := replayWith(t, sluice.AlgorithmSlidingWindow, evs, simulate.Async(nodes, simulate.RoundRobin, interval), nil)
	if async.OverAdmission <= single.OverAdmission || async.Denials >= single.Denials {
		t.Errorf("async x%d: over-admission %v, %d denials; one instance: %v, %d", nodes, async.OverAdmission, async.Denials,
			single.OverAdmission, single.Denials)
	}
	sticky := replayWith(t, sluice.AlgorithmSlidingWindow, evs, simulate.Async(nodes, simulate.Sticky, interval), nil)
	if sticky.OverAdmission != single.OverAdmission || sticky.Denials != single.Denials {
		t.Errorf("async x%d, sticky: over-admission %v, %d denials; one instance: %v, %d", nodes, sticky.OverAdmission, sticky.Denials, single.OverAdmission, single.Denials)
	}
}

// TestReplayOnRedis: the same log decided on Redis (the log's time as the scripts' client
// time) finds the same denials as on the memory store.
func TestReplayOnRedis(t *testing.T) {
	url := "redis://" + testenv.RedisAddr(t)
	evs := testTraffic()
	n := 0
	st := func(clock sluice.Clock) (sluice.Store, io.Closer, error) {
		n++
		return store.Open(context.Background(), store.Config{Backend: store.Backend{URL: url, Clock: clock, Timeout: 5 * time.Second,
			Prefix: fmt.Sprintf("sluice-replay-test:%d:%d:", time.Now().UnixNano(), n)}})
	}
	for _, a := range []sluice.Algorithm{sluice.AlgorithmSlidingLog, sluice.AlgorithmTokenBucket, sluice.AlgorithmFixedWindow} {
		mem := replayWith(t, a, evs, simulate.Mode{}, nil)
		red := replayWith(t, a, evs, simulate.Mode{}, st)
		if mem.Denials != red.Denials || mem.ExactDenials != red.ExactDenials || mem.OverAdmission != red.OverAdmission {
			t.Errorf("%s: Redis denies %d (%d exact, over-admission %v), memory %d (%d, %v)", a, red.Denials, red.ExactDenials, red.OverAdmission,
				mem.Denials, mem.ExactDenials, mem.OverAdmission)
		}
	}
}
