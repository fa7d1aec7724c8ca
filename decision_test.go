package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestResetIn: the reset a transport reports; a denial's is always positive (issue 30: an
// OVER_LIMIT with reset 0 made clients retry at once, forever).
func TestResetIn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      sluice.Decision
		period time.Duration
		want   time.Duration
	}{
		{"allowed: until full", sluice.Decision{Allowed: true, ResetAfter: 3 * time.Second}, time.Minute, 3 * time.Second},
		{"allowed, full: 0", sluice.Decision{Allowed: true}, time.Minute, 0},
		{"denied: until allowed", sluice.Decision{RetryAfter: 2 * time.Second, ResetAfter: 9 * time.Second}, time.Minute, 2 * time.Second},
		{"denied beyond a period: a sliding window drains in two", sluice.Decision{RetryAfter: 106 * time.Second, ResetAfter: 110 * time.Second}, time.Minute, 106 * time.Second},
		{"never: until empty", sluice.Decision{RetryAfter: sluice.Never, ResetAfter: 20 * time.Second}, time.Minute, 20 * time.Second},
		{"never: at most the period", sluice.Decision{RetryAfter: sluice.Never, ResetAfter: 90 * time.Second}, time.Minute, time.Minute},
		{"never on an empty state: the period, not 0", sluice.Decision{RetryAfter: sluice.Never}, time.Hour, time.Hour},
		{"a denial that does not say: until empty", sluice.Decision{ResetAfter: 5 * time.Second}, time.Minute, 5 * time.Second},
		{"a denial that does not say, beyond a period: until empty", sluice.Decision{ResetAfter: 2 * time.Second}, time.Second, 2 * time.Second},
		{"a denial that does not say, empty: the period", sluice.Decision{}, time.Minute, time.Minute},
		{"no period: a second", sluice.Decision{RetryAfter: sluice.Never}, 0, time.Second},
	} {
		if got := tc.d.ResetIn(tc.period); got != tc.want {
			t.Errorf("%s: ResetIn(%v) of %+v = %v, want %v", tc.name, tc.period, tc.d, got, tc.want)
		}
	}
}
