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

// dump is the rules as envoyproxy/ratelimit's config.Dump writes them, a line a limit: its
// provider tests compare these lines.
func dump(c *config.Config) []string { return strings.Split(strings.TrimSuffix(c.Dump(), "\n"), "\n") }
