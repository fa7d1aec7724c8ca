package rls_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/store/memory"
)

// pushSource is a RulesSource a test drives: Run hands the engine's hooks to the test.
type pushSource struct{ hooks chan [2]any }

func (s pushSource) Run(ctx context.Context, apply func(*config.Config), reject func(error)) {
	s.hooks <- [2]any{apply, reject}
	<-ctx.Done()
}

// TestRulesSource: until its source delivers, the engine decides nothing (an error of kind
// Unavailable wrapping ErrNoRules, never OK) and is not ready unless ReadyWithoutRules;
// rules pushed are in force at once, a rejection counts as a failed reload and keeps them.
func TestRulesSource(t *testing.T) {
	for _, readyWithout := range []bool{false, true} {
		mem, err := memory.New()
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		src := pushSource{hooks: make(chan [2]any, 1)}
		e := observed(t, rls.Config{RulesSource: src, ReadyWithoutRules: readyWithout, Store: mem})
		req := &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{desc("k", "v")}}
		var ans rls.Answer
		err = e.Decide(context.Background(), req, &ans)
		if !errors.Is(err, rls.ErrNoRules) || rls.KindOf(err) != rls.KindUnavailable {
			t.Fatalf("Decide before rules: %v, want ErrNoRules of kind Unavailable", err)
		}
		if _, err := e.Ready(context.Background()); (err == nil) != readyWithout {
			t.Errorf("ReadyWithoutRules=%v: Ready before rules = %v", readyWithout, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.Run(ctx); close(done) }()
		hooks := <-src.hooks
		apply, reject := hooks[0].(func(*config.Config)), hooks[1].(func(error))
		doc, err := config.Decode("r.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"))
		if err != nil {
			t.Fatal(err)
		}
		rules, err := config.Compile(doc)
		if err != nil {
			t.Fatal(err)
		}
		apply(rules)
		reject(errors.New("bad snapshot"))
		for i, want := range []rls.Code{rls.CodeOK, rls.CodeOverLimit} {
			if err := e.Decide(context.Background(), req, &ans); err != nil || ans.Code != want {
				t.Errorf("request %d after the rules: %v %v, want %v", i, ans.Code, err, want)
			}
		}
		if _, err := e.Ready(context.Background()); err != nil {
			t.Errorf("Ready with rules: %v", err)
		}
		if got := reloads(t, e); got["success"] != 1 || got["failure"] != 1 {
			t.Errorf("sluice_config_reloads_total: %v, want one success and one failure", got)
		}
		cancel()
		<-done
	}
}

// reloads returns sluice_config_reloads_total by result.
func reloads(t *testing.T, e *rls.Engine) map[string]float64 {
	t.Helper()
	reg, _ := registries.Load(e)
	mfs, err := reg.(*prometheus.Registry).Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}
