package xds_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// eventually polls cond every 5 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// newEngine is an engine over a memory store on a manual clock at t0.
func newEngine(t *testing.T, cfg rls.Config) *rls.Engine {
	t.Helper()
	mem, err := memory.New(memory.WithClock(sluicetest.NewManualClock(t0)), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	cfg.Store = mem
	cfg.ReloadInterval = -1
	e, err := rls.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// runEngine runs e (its RulesSource) until the test ends.
func runEngine(t *testing.T, e *rls.Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// answer decides one request of alternating keys and values and summarises the answer (or
// the error).
func answer(e *rls.Engine, domain string, kv ...string) string {
	req := &rls.Request{Domain: domain, Descriptors: []rls.Descriptor{{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Descriptors[0].Entries = append(req.Descriptors[0].Entries, rls.Entry{Key: kv[i], Value: kv[i+1]})
	}
	var ans rls.Answer
	if err := e.Decide(context.Background(), req, &ans); err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	b.WriteString(ans.Code.String())
	for _, v := range ans.Verdicts {
		key := ""
		if v.Limit != nil {
			key = v.Limit.FullKey
		}
		fmt.Fprintf(&b, " [%s %s remaining=%d reset=%v]", key, v.Code, v.Remaining, v.Reset)
	}
	return b.String()
}

// dump is the rules as envoyproxy/ratelimit's config.Dump writes them (one line per limit),
// sorted: its provider tests compare these lines.
func dump(c *config.Config) []string {
	var lines []string
	for _, l := range c.Limits() {
		unit := strings.ToUpper(l.Unit.String())
		if l.Unlimited {
			unit = "UNKNOWN"
		}
		lines = append(lines, fmt.Sprintf("%s: unit=%s requests_per_unit=%d, shadow_mode: %t, quota_mode: %t",
			l.FullKey, unit, l.RequestsPerUnit, l.ShadowMode, l.QuotaMode))
	}
	return lines
}
