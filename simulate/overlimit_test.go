package simulate

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
)

// The over-limit mode answers exactly as sync mode on the flood: its allows are the store's,
// and a denial it serves from its cache is one the store would have given.
func TestOverLimitModeIsSyncAccuracy(t *testing.T) {
	modes, err := ParseModes("sync,overlimit", 4, []Routing{RoundRobin, Sticky})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, Config{Scenario: flood, Seed: 1, Modes: modes, Variants: []Variant{
		{Algorithm: sluice.AlgorithmSlidingWindow}, {Algorithm: sluice.AlgorithmFixedWindow},
		{Algorithm: sluice.AlgorithmGCRA}, {Algorithm: sluice.AlgorithmTokenBucket}}})
	sync := map[string]Row{}
	for _, r := range res.Rows {
		if r.Mode == "sync" {
			sync[r.Algorithm+"/"+r.Routing] = r
		}
	}
	n := 0
	for _, r := range res.Rows {
		if r.Mode != "overlimit" {
			continue
		}
		n++
		want, ok := sync[r.Algorithm+"/"+r.Routing]
		if !ok {
			t.Fatalf("no sync row for %s/%s", r.Algorithm, r.Routing)
		}
		want.Mode = "overlimit"
		if !sameRow(r, want) {
			t.Errorf("%s/%s: overlimit %+v\nwant sync's %+v", r.Algorithm, r.Routing, r, want)
		}
		if r.AdmittedFraction <= 0 || r.AdmittedFraction > 0.2 {
			t.Errorf("%s/%s: admitted %v of a flood at 10x the limit", r.Algorithm, r.Routing, r.AdmittedFraction)
		}
	}
	if n != 8 {
		t.Fatalf("%d overlimit rows, want 8", n)
	}
}

// sameRow compares two rows cell by cell, exactly.
func sameRow(a, b Row) bool { return slices.Equal(a.cells(-1), b.cells(-1)) }
