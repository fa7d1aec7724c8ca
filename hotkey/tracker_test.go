package hotkey_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/sluicetest"
)

// The tracker's rates are the sliding estimate over the current and the previous period,
// with denials counted apart; a period later the old values fade out.
func TestTrackerRates(t *testing.T) {
	clock := sluicetest.NewManualClock(t0) // t0 is on a multiple of 10 s
	tr := hotkey.NewTracker(4, 10*time.Second, clock)
	for range 30 {
		tr.Add("a", 1, false)
	}
	for range 10 {
		tr.Add("b", 1, true)
	}
	top, total := tr.Top(0)
	if len(top) != 2 || top[0].Value != "a" || top[0].Rate != 3 || top[0].DeniedRate != 0 ||
		top[1].Value != "b" || top[1].Rate != 1 || top[1].DeniedRate != 1 || total != 4 {
		t.Fatalf("top %+v total %v", top, total)
	}
	clock.Advance(15 * time.Second) // half-way through the next period: the previous counts half
	top, total = tr.Top(1)
	if len(top) != 1 || top[0].Value != "a" || top[0].Rate != 1.5 || total != 2 {
		t.Fatalf("half a period later: top %+v total %v", top, total)
	}
	clock.Advance(10 * time.Second)
	if top, total = tr.Top(0); len(top) != 0 || total != 0 {
		t.Fatalf("two periods later: top %+v total %v", top, total)
	}
}
