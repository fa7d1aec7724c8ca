package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestFieldErrors checks every validation of the package: the error is a *FieldError naming
// the field, wraps the sentinel, and its message is "<sentinel>: <field>: <reason>".
func TestFieldErrors(t *testing.T) {
	l, _ := newLimiter(t)
	ctx := context.Background()
	long := strings.Repeat("k", sluice.DefaultMaxKeyLength+1)
	counts := func(maxKeyLen int, f func(*sluice.WindowCounts)) error {
		w := sluice.WindowCounts{Key: "k", Length: time.Second, TTL: time.Second, Deltas: []int64{1}, Totals: []int64{0}}
		f(&w)
		return w.Validate(maxKeyLen)
	}
	cases := []struct {
		name     string
		err      error
		sentinel error
		field    string
		msg      string
	}{
		{"ParseAlgorithm", func() error { _, err := sluice.ParseAlgorithm("x"); return err }(), sluice.ErrInvalidRule, "algorithm",
			`sluice: invalid rule: algorithm: unknown "x" (want one of fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, gcra)`},
		{"MarshalText", func() error { _, err := sluice.Algorithm(99).MarshalText(); return err }(), sluice.ErrInvalidRule, "algorithm",
			"sluice: invalid rule: algorithm: unknown value 99"},
		{"algorithm", sluice.Rule{Limit: 1, Period: time.Second}.Validate(), sluice.ErrInvalidRule, "algorithm",
			"sluice: invalid rule: algorithm: unknown value 0"},
		{"limit", sluice.PerSecond(0).Validate(), sluice.ErrInvalidRule, "limit",
			"sluice: invalid rule: limit: must be positive, got 0"},
		{"limit max", sluice.PerSecond(sluice.MaxLimit + 1).Validate(), sluice.ErrInvalidRule, "limit",
			"sluice: invalid rule: limit: must be at most 1000000000, got 1000000001"},
		{"period", sluice.Per(1, 0).Validate(), sluice.ErrInvalidRule, "period",
			"sluice: invalid rule: period: must be between 1ms and 8784h0m0s, got 0s"},
		{"period ms", sluice.Per(1, 1500*time.Microsecond).Validate(), sluice.ErrInvalidRule, "period",
			"sluice: invalid rule: period: must be a whole number of milliseconds, got 1.5ms"},
		{"burst", sluice.TokenBucket(1, time.Second, -1).Validate(), sluice.ErrInvalidRule, "burst",
			"sluice: invalid rule: burst: must be between 0 (= limit) and 1000000000, got -1"},
		{"burst window", sluice.PerSecond(1).WithBurst(2).Validate(), sluice.ErrInvalidRule, "burst",
			"sluice: invalid rule: burst: not used by sliding_window, got 2"},
		{"sub_windows", sluice.SlidingWindow(1, time.Second, 61).Validate(), sluice.ErrInvalidRule, "sub_windows",
			"sluice: invalid rule: sub_windows: must be between 0 (= 1) and 60, got 61"},
		{"sub_windows divide", sluice.SlidingWindow(1, time.Second, 7).Validate(), sluice.ErrInvalidRule, "sub_windows",
			"sluice: invalid rule: sub_windows: period 1s does not divide into 7 whole-millisecond sub-windows"},
		{"sub_windows unused", sluice.Rule{Algorithm: sluice.AlgorithmFixedWindow, Limit: 1, Period: time.Second, SubWindows: 2}.Validate(),
			sluice.ErrInvalidRule, "sub_windows", "sluice: invalid rule: sub_windows: not used by fixed_window, got 2"},
		{"gcra", sluice.GCRA(2000, time.Millisecond, 0).Validate(), sluice.ErrInvalidRule, "limit",
			"sluice: invalid rule: limit: gcra emits at most one unit per microsecond, got 2000 per 1ms"},
		{"refill", sluice.TokenBucket(1, 24*time.Hour, sluice.MaxLimit).Validate(), sluice.ErrInvalidRule, "burst",
			"sluice: invalid rule: burst: 1000000000 units take longer than 8784h0m0s to refill"},
		{"sliding_log", sluice.SlidingLog(sluice.MaxSlidingLogLimit+1, time.Hour).Validate(), sluice.ErrInvalidRule, "limit",
			"sluice: invalid rule: limit: sliding_log keeps one timestamp per request and allows at most 1000000, got 1000001"},
		{"request key", (&sluice.Request{Rule: sluice.PerSecond(1)}).Validate(0), sluice.ErrInvalidKey, "key",
			"sluice: invalid key: key: empty"},
		{"request long key", (&sluice.Request{Key: long}).ValidateArgs(0), sluice.ErrInvalidKey, "key",
			"sluice: invalid key: key: 1025 bytes, longer than the maximum of 1024"},
		{"request n", (&sluice.Request{Key: "k", N: -sluice.MaxLimit - 1}).ValidateArgs(0), sluice.ErrInvalidN, "n",
			"sluice: invalid n: n: refund of 1000000001 is below the minimum of -1000000000"},
		{"request max_delay", (&sluice.Request{Key: "k", MaxDelay: -1}).ValidateArgs(0), sluice.ErrInvalidN, "max_delay",
			"sluice: invalid n: max_delay: negative (-1ns)"},
		{"request rule", (&sluice.Request{Key: "k"}).Validate(0), sluice.ErrInvalidRule, "algorithm",
			"sluice: invalid rule: algorithm: unknown value 0"},
		{"counts key", counts(0, func(w *sluice.WindowCounts) { w.Key = "" }), sluice.ErrInvalidKey, "key",
			"sluice: invalid key: key: empty"},
		{"counts long key", counts(1, func(w *sluice.WindowCounts) { w.Key = "kk" }), sluice.ErrInvalidKey, "key",
			"sluice: invalid key: key: 2 bytes, longer than the maximum of 1"},
		{"counts length", counts(0, func(w *sluice.WindowCounts) { w.Length = time.Microsecond }), sluice.ErrInvalidRule, "length",
			"sluice: invalid rule: length: must be a whole number of milliseconds, got 1µs"},
		{"counts ttl", counts(0, func(w *sluice.WindowCounts) { w.TTL = 0 }), sluice.ErrInvalidRule, "ttl",
			"sluice: invalid rule: ttl: must be positive, got 0s"},
		{"counts deltas", counts(0, func(w *sluice.WindowCounts) { w.Deltas, w.Totals = nil, nil }), sluice.ErrInvalidN, "deltas",
			"sluice: invalid n: deltas: want 1 to 61 windows, got 0"},
		{"counts totals", counts(0, func(w *sluice.WindowCounts) { w.Totals = nil }), sluice.ErrInvalidN, "totals",
			"sluice: invalid n: totals: length 0, want 1 (one per delta)"},
		{"WaitN", l.WaitN(ctx, "k", sluice.PerSecond(1), -1), sluice.ErrInvalidN, "n",
			"sluice: invalid n: n: Wait needs n >= 0, got -1"},
		{"AllowAll", func() error { _, err := l.AllowAll(ctx, nil); return err }(), sluice.ErrInvalidN, "checks",
			"sluice: invalid n: checks: empty"},
	}
	for _, c := range cases {
		var fe *sluice.FieldError
		switch {
		case !errors.As(c.err, &fe):
			t.Errorf("%s: %v (%T) is not a *FieldError", c.name, c.err, c.err)
		case fe.Field != c.field:
			t.Errorf("%s: field %q, want %q", c.name, fe.Field, c.field)
		case !errors.Is(c.err, c.sentinel) || fe.Err != c.sentinel:
			t.Errorf("%s: %v does not wrap %v", c.name, c.err, c.sentinel)
		case c.err.Error() != c.msg:
			t.Errorf("%s: message\n%s\nwant\n%s", c.name, c.err, c.msg)
		case c.err.Error() != fe.Err.Error()+": "+fe.Field+": "+fe.Reason:
			t.Errorf("%s: message %q is not sentinel: field: reason", c.name, c.err)
		}
	}
}

func TestFieldErrorWithoutSentinel(t *testing.T) {
	err := &sluice.FieldError{Field: "f", Reason: "bad"}
	if got := err.Error(); got != "sluice: invalid: f: bad" {
		t.Errorf("Error() = %q", got)
	}
}
