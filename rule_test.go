package sluice_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestAlgorithmNames(t *testing.T) {
	want := []string{"fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"}
	for i, a := range sluice.Algorithms() {
		if a.String() != want[i] {
			t.Errorf("algorithm %d: %q, want %q", i, a, want[i])
		}
		back, err := sluice.ParseAlgorithm(want[i])
		if err != nil || back != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", want[i], back, err)
		}
	}
	_, err := sluice.ParseAlgorithm("leaky")
	if !errors.Is(err, sluice.ErrInvalidRule) || !strings.Contains(err.Error(), "algorithm") {
		t.Errorf("ParseAlgorithm(leaky): %v", err)
	}
}

func TestRuleJSON(t *testing.T) {
	r := sluice.TokenBucket(10, time.Second, 20)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"algorithm":"token_bucket","limit":10,"period":1000000000,"burst":20}` {
		t.Errorf("json: %s", got)
	}
	var back sluice.Rule
	if err := json.Unmarshal(b, &back); err != nil || back != r {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"algorithm":"nope"}`), &back); !errors.Is(err, sluice.ErrInvalidRule) {
		t.Errorf("unknown algorithm in JSON: %v", err)
	}
}

func TestRuleValidate(t *testing.T) {
	valid := []sluice.Rule{
		sluice.PerSecond(1), sluice.PerMinute(100), sluice.PerHour(5000),
		sluice.FixedWindow(10, time.Minute), sluice.SlidingLog(1000, time.Minute),
		sluice.SlidingWindow(100, time.Minute, 12), sluice.TokenBucket(10, time.Second, 0),
		sluice.LeakyBucket(5, time.Second, 50), sluice.GCRA(1000, time.Second, 1),
		sluice.TokenBucket(1_000_000, 24*time.Hour, 1_000_000),
	}
	for _, r := range valid {
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	invalid := []struct {
		rule  sluice.Rule
		field string
	}{
		{sluice.Rule{}, "algorithm"},
		{sluice.PerSecond(0), "limit"},
		{sluice.PerSecond(-5), "limit"},
		{sluice.PerSecond(sluice.MaxLimit + 1), "limit"},
		{sluice.Per(1, 0), "period"},
		{sluice.Per(1, -time.Second), "period"},
		{sluice.Per(1, time.Microsecond*1500), "period"},
		{sluice.Per(1, 400*24*time.Hour), "period"},
		{sluice.FixedWindow(1, time.Second).WithBurst(2), "burst"},
		{sluice.TokenBucket(1, time.Second, -1), "burst"},
		{sluice.TokenBucket(1, time.Hour, 10_000), "burst"}, // 10,000 hours to refill
		{sluice.SlidingWindow(1, time.Second, -1), "sub_windows"},
		{sluice.SlidingWindow(1, time.Second, 61), "sub_windows"},
		{sluice.SlidingWindow(1, time.Second, 7), "sub_windows"}, // 142.857 ms sub-windows
		{sluice.Rule{Algorithm: sluice.AlgorithmGCRA, Limit: 1, Period: time.Second, SubWindows: 2}, "sub_windows"},
		{sluice.SlidingLog(sluice.MaxSlidingLogLimit+1, time.Hour), "limit"},
		{sluice.GCRA(2_000_000, time.Second, 0), "limit"},
	}
	for _, c := range invalid {
		err := c.rule.Validate()
		if !errors.Is(err, sluice.ErrInvalidRule) {
			t.Errorf("%+v: got %v, want ErrInvalidRule", c.rule, err)
			continue
		}
		if !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("%+v: error %q does not name the field %q", c.rule, err, c.field)
		}
	}
}

// FuzzRuleValidate checks that Validate never panics and that a rule it accepts can be
// formatted and has a positive capacity.
func FuzzRuleValidate(f *testing.F) {
	f.Add(uint8(1), int64(10), int64(time.Second), int64(0), 0)
	f.Add(uint8(3), int64(100), int64(time.Minute), int64(0), 12)
	f.Add(uint8(6), int64(1), int64(time.Millisecond), int64(5), 0)
	f.Fuzz(func(t *testing.T, alg uint8, limit, period, burst int64, sub int) {
		r := sluice.Rule{Algorithm: sluice.Algorithm(alg), Limit: limit, Period: time.Duration(period), Burst: burst, SubWindows: sub}
		if err := r.Validate(); err != nil {
			if !errors.Is(err, sluice.ErrInvalidRule) {
				t.Fatalf("error does not wrap ErrInvalidRule: %v", err)
			}
			return
		}
		if r.Capacity() <= 0 || r.String() == "" {
			t.Fatalf("accepted rule %+v has capacity %d", r, r.Capacity())
		}
	})
}
