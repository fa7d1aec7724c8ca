package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestCombine(t *testing.T) {
	checks := func(ds ...sluice.Decision) []sluice.Check {
		cs := make([]sluice.Check, len(ds))
		for i, d := range ds {
			cs[i].Decision = d
		}
		return cs
	}
	ok := func(limit, remaining int64, reset time.Duration) sluice.Decision {
		return sluice.Decision{Allowed: true, Capacity: limit, Remaining: remaining, ResetAfter: reset}
	}
	deny := func(limit, remaining int64, retry, reset time.Duration) sluice.Decision {
		return sluice.Decision{Capacity: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
	}
	for _, c := range []struct {
		name    string
		checks  []sluice.Check
		allowed bool
		want    sluice.Decision
		binding int
	}{
		{"empty", nil, true, sluice.Decision{}, -1},
		{"one", checks(ok(5, 4, time.Second)), true, ok(5, 4, time.Second), 0},
		{"least remaining binds, first on a tie", checks(ok(10, 3, time.Second), ok(5, 2, time.Minute), ok(7, 2, 0)), true,
			ok(5, 2, time.Minute), 1},
		{"longest retry among denials", checks(deny(10, 0, time.Second, time.Second), ok(5, 4, 0), deny(3, 1, time.Minute, 0)), false,
			deny(10, 0, time.Minute, time.Second), 0},
		{"never wins", checks(deny(10, 5, sluice.Never, time.Second), deny(5, 0, time.Minute, 0)), false,
			deny(5, 0, sluice.Never, time.Second), 1},
		{"not allowed although every check allowed", checks(ok(10, 0, time.Second)), false,
			deny(10, 0, 0, time.Second), 0},
	} {
		got, binding := sluice.Combine(c.checks, c.allowed)
		if got != c.want || binding != c.binding {
			t.Errorf("%s: %+v binding %d, want %+v binding %d", c.name, got, binding, c.want, c.binding)
		}
	}
}
