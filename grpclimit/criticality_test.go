package grpclimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/sluicetest"
)

// The client interceptor sends the class set by WithCriticality; the server's limit with
// shares admits SHEDDABLE calls up to half its capacity, CRITICAL_PLUS ones to the end. The
// calls come in the window's last millisecond, where the fixed window's pace
// (algorithm.TakeHoldback) has let every class's whole share through.
func TestCriticalityTravelsAndSheds(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 59, 999e6, time.UTC))
	l := newMemory(t, clock)
	in := mustNew(t, l, every(grpclimit.Limit{Name: "all", Rule: sluice.FixedWindow(10, time.Minute), Shares: &sluice.DefaultShares}))
	client := mustNew(t, l, nil)
	s := serve(t, in, client)
	var got []codes.Code
	for range 6 {
		ctx, cancel := context.WithTimeout(grpclimit.WithCriticality(context.Background(), sluice.Sheddable), 10*time.Second)
		got = append(got, s.checkCtx(t, ctx, "").code)
		cancel()
	}
	for range 6 {
		got = append(got, s.check(t, "", grpclimit.CriticalityMetadata, "CRITICAL_PLUS").code)
	}
	want := "[OK OK OK OK OK ResourceExhausted OK OK OK OK OK ResourceExhausted]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
}

// A hot metadata parameter: each product keeps its own limit; cold ones pass without a store
// call and are charged when they turn hot.
func TestHotMetadataParameter(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newMemory(t, clock)
	in := mustNew(t, l, every(grpclimit.Limit{Name: "product", Rule: sluice.FixedWindow(4, time.Minute),
		Key: grpclimit.KeyMetadata("product"), Hot: &hotkey.Config{TopK: 16, ColdLimit: 2}}), grpclimit.WithClock(clock))
	s := serve(t, in, nil)
	for i := range 40 {
		if c := s.check(t, "", "product", fmt.Sprint("p", i)).code; c != codes.OK {
			t.Fatalf("cold product %d: %v", i, c)
		}
	}
	var got []codes.Code
	for range 6 {
		got = append(got, s.check(t, "", "product", "flash").code)
	}
	if want := "[OK OK OK OK ResourceExhausted ResourceExhausted]"; fmt.Sprint(got) != want {
		t.Errorf("hot product: %v, want %s", got, want)
	}
}

// On a limit with shares the call's class reaches the store too (Request.Criticality), so a
// store that serves classes apart (the quota client) sees it.
func TestCriticalityReachesStore(t *testing.T) {
	st := &sluicetest.Recorder{}
	in := mustNew(t, sluice.New(st), every(grpclimit.Limit{Name: "all", Rule: sluice.FixedWindow(10, time.Minute), Shares: &sluice.DefaultShares}))
	s := serve(t, in, nil)
	for _, c := range []string{"SHEDDABLE", "CRITICAL_PLUS"} {
		if r := s.check(t, "", grpclimit.CriticalityMetadata, c); r.code != codes.OK {
			t.Fatalf("%s: %v", c, r.code)
		}
	}
	if want := []sluice.Criticality{sluice.Sheddable, sluice.CriticalPlus}; fmt.Sprint(st.Classes()) != fmt.Sprint(want) {
		t.Fatalf("store saw %v, want %v", st.Classes(), want)
	}
}
