package sluice_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

func TestParseCriticality(t *testing.T) {
	for in, want := range map[string]sluice.Criticality{"CRITICAL_PLUS": sluice.CriticalPlus, "critical": sluice.Critical,
		"Sheddable_Plus": sluice.SheddablePlus, "SHEDDABLE": sluice.Sheddable} {
		if c, ok := sluice.ParseCriticality(in); !ok || c != want {
			t.Errorf("%q: %v %v, want %v", in, c, ok, want)
		}
	}
	if c, ok := sluice.ParseCriticality("URGENT"); ok || c != sluice.Critical {
		t.Errorf("unknown class: %v %v, want CRITICAL, false", c, ok)
	}
	if err := (sluice.Shares{1, 1, 1, 1.5}).Validate(); err == nil {
		t.Error("a share of 1.5 was accepted")
	}
}

// Under a 2x overload with an even class mix, the classes are admitted in their order: the
// lower classes stop at their share, and only CRITICAL_PLUS uses the last 10%. The burst comes
// in the window's last millisecond, where the fixed window's pace has let every share through
// (TestAllowClassPacesFixedWindow checks earlier instants).
func TestAllowClassShedsLowestFirst(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 59, 59, 999e6, time.UTC))
	mem, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	l := sluice.New(mem)
	rule := sluice.FixedWindow(100, time.Hour)
	admitted := map[sluice.Criticality]int{}
	for range 50 { // 200 requests for a limit of 100, each class a quarter
		for _, c := range []sluice.Criticality{sluice.Sheddable, sluice.SheddablePlus, sluice.Critical, sluice.CriticalPlus} {
			d, err := l.AllowClass(context.Background(), "k", rule, 1, c)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted[c]++
			}
		}
	}
	s, sp, c, cp := admitted[sluice.Sheddable], admitted[sluice.SheddablePlus], admitted[sluice.Critical], admitted[sluice.CriticalPlus]
	if !(s < sp && sp < c && c < cp) || s+sp+c+cp != 100 || s+sp+c > 90 {
		t.Errorf("admitted per class: %v", admitted)
	}
}

// The class reaches the store (Request.Criticality) from AllowClass, CRITICAL_PLUS with no
// holdback included, and from AllowAll's checks.
func TestStoreSeesCriticality(t *testing.T) {
	st := &sluicetest.Recorder{}
	l := sluice.New(st)
	rule := sluice.TokenBucket(10, time.Second, 10)
	for _, c := range sluice.Criticalities() {
		if _, err := l.AllowClass(context.Background(), "k", rule, 1, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range sluice.Criticalities() {
		if _, err := l.AllowAll(context.Background(), []sluice.Check{{Key: "k", Rule: rule, Criticality: c}}); err != nil {
			t.Fatal(err)
		}
	}
	want := append(sluice.Criticalities(), sluice.Criticalities()...)
	if got := st.Classes(); !slices.Equal(got, want) {
		t.Fatalf("store saw %v, want %v", got, want)
	}
}
