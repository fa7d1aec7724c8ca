package logthrottle

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	var th Throttle
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		at    time.Duration
		wrote bool
		supp  int64
	}{
		{0, true, 0},
		{100 * time.Millisecond, false, 0},
		{999 * time.Millisecond, false, 0},
		{time.Second, true, 2},
		{1500 * time.Millisecond, false, 0},
		{500 * time.Millisecond, false, 0}, // the clock moved back: still held back
		{3 * time.Second, true, 2},
	}
	for i, s := range steps {
		buf.Reset()
		th.Log(context.Background(), l, t0.Add(s.at), slog.LevelWarn, "store error", slog.String("err", "x"))
		out := buf.String()
		if wrote := out != ""; wrote != s.wrote {
			t.Fatalf("step %d at %v: wrote %v, want %v (%q)", i, s.at, wrote, s.wrote, out)
		}
		if s.wrote && (s.supp > 0) != strings.Contains(out, SuppressedKey+"=") {
			t.Fatalf("step %d: %q, want %s=%d", i, out, SuppressedKey, s.supp)
		}
		if s.supp > 0 && !strings.Contains(out, SuppressedKey+"="+strconv.FormatInt(s.supp, 10)) {
			t.Fatalf("step %d: %q, want %s=%d", i, out, SuppressedKey, s.supp)
		}
	}
}

func TestThrottleNegativeIntervalWritesAll(t *testing.T) {
	th := Throttle{Interval: -1}
	now := time.Unix(1, 0)
	for i := range 5 {
		if n, ok := th.Allow(now); !ok || n != 0 {
			t.Fatalf("line %d: ok=%v suppressed=%d", i, ok, n)
		}
	}
}
