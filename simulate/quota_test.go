package simulate

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestQuotaModeIsFairAndWithinBudget: with skewed routing, the quota mode's shares follow
// the max-min fair split of the instances' demands closely, the fleet admits about one
// limit per period, and deciding the same seed twice gives the same table.
func TestQuotaModeIsFairAndWithinBudget(t *testing.T) {
	modes, err := ParseModes("quota_1s", 4, []Routing{Skewed})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := ParseVariants("token_bucket,sliding_window")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Scenario: steady, Seed: 1, Duration: 10 * time.Minute, Modes: modes, Variants: vs}
	res := run(t, cfg)
	for _, r := range res.Rows {
		if math.IsNaN(r.FairnessError) || r.FairnessError > 0.05 {
			t.Errorf("%s: fairness error %v, want at most 5%% of the limit misassigned", r.Algorithm, r.FairnessError)
		}
		if r.OverAdmission > 1.5 {
			t.Errorf("%s: over-admission %v", r.Algorithm, r.OverAdmission)
		}
	}
	if len(res.Series.Shares) != 4 || len(res.Series.Shares[0]) != len(res.Series.Times) {
		t.Fatalf("shares series %d x ?, want 4 instances", len(res.Series.Shares))
	}
	again := run(t, cfg)
	if fmt.Sprint(res.Rows) != fmt.Sprint(again.Rows) {
		t.Errorf("same seed, different rows: %+v vs %+v", res.Rows[0], again.Rows[0])
	}
	sync := run(t, Config{Scenario: steady, Seed: 1, Duration: 10 * time.Minute, Modes: []Mode{Sync(4, Skewed)}, Variants: vs})
	if !math.IsNaN(sync.Rows[0].FairnessError) {
		t.Errorf("sync mode has a fairness error %v", sync.Rows[0].FairnessError)
	}
}

func TestParseQuotaMode(t *testing.T) {
	if m, err := ParseModes("quota_500ms", 3, nil); err != nil || m[0].Name != "quota_500ms" || m[0].SyncEvery != 500*time.Millisecond {
		t.Fatalf("quota_500ms: %+v %v", m, err)
	}
	if _, err := ParseModes("quota_0s", 3, nil); err == nil || !strings.Contains(err.Error(), "reporting interval") {
		t.Fatalf("quota_0s: %v", err)
	}
}
