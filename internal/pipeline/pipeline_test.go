package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// failing is a memory store whose calls fail with err while it is set: takes and lease
// acquires alike. (Not embedding the store: its in-process fast path would bypass Take.)
type failing struct {
	mem *memory.Store
	err error
}

func (f *failing) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if f.err != nil {
		return sluice.Decision{}, f.err
	}
	return f.mem.Take(ctx, req)
}

func (f *failing) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	if f.err != nil {
		return sluice.LeaseDecision{}, f.err
	}
	return f.mem.AcquireLease(ctx, req)
}

func (f *failing) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	return f.mem.RenewLeases(ctx, batch)
}

func (f *failing) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	return f.mem.ReleaseLease(ctx, key, id)
}

func newMemory(t *testing.T, clock sluice.Clock) *memory.Store {
	t.Helper()
	s, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestFailureHandler: one failure handler, one semantics, at either step (the rate decision,
// the in-flight claim), for every failure policy: the request's own context ending is
// Canceled and counts nothing; a key the store refuses is Invalid whatever the policy; any
// other store failure is a StoreError, answered by the policy (open: Pass without the limits;
// closed: Unavailable naming the limit; local: decided by the local limiter).
func TestFailureHandler(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	unavailable := fmt.Errorf("test: %w", sluice.ErrStoreUnavailable)
	badKey := &sluice.FieldError{Field: "key", Reason: "2000 bytes, longer than the maximum of 1024", Err: sluice.ErrInvalidKey}
	limits := map[string]pipeline.Limit{
		"rate":      {Name: "rate", Rule: sluice.FixedWindow(5, time.Minute)},
		"in_flight": {Name: "busy", InFlight: &sluice.InFlight{Limit: 5}},
	}
	for step, lim := range limits {
		for _, policy := range []distributed.FailurePolicy{distributed.FailOpen, distributed.FailClosed, distributed.FailLocal} {
			for _, tc := range []struct {
				name      string
				err       error
				cancel    bool
				want      pipeline.Answer
				storeErrs uint64
				badInput  uint64
			}{
				{"canceled", context.Canceled, true, pipeline.Canceled, 0, 0},
				{"invalid key", badKey, false, pipeline.Invalid, 0, 1},
				{"unavailable", unavailable, false, map[distributed.FailurePolicy]pipeline.Answer{
					distributed.FailOpen: pipeline.Pass, distributed.FailClosed: pipeline.Unavailable, distributed.FailLocal: pipeline.Pass}[policy], 1, 0},
			} {
				t.Run(fmt.Sprintf("%s/%v/%s", step, policy, tc.name), func(t *testing.T) {
					st := &failing{mem: newMemory(t, clock), err: tc.err}
					var logs testenv.LogBuffer
					cfg := pipeline.Config{Name: "test", Limiter: sluice.New(st), Failure: policy, Clock: clock, Stats: &pipeline.Stats{},
						Log: slog.New(slog.NewJSONHandler(&logs, nil))}
					if policy == distributed.FailLocal {
						cfg.Local = sluice.New(newMemory(t, clock))
					}
					p, err := pipeline.New(cfg, []pipeline.Limit{lim}, []string{"limits[0]"}, [][]int{{0}}, 0)
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					if tc.cancel {
						cancel()
					}
					defer cancel()
					q := p.Get()
					defer q.Put()
					q.Add(0, append(q.Begin(0), "client"...), 1, sluice.Critical)
					o := q.Decide(ctx, 0)
					q.Finish()
					s := p.Stats()
					if o.Answer != tc.want || s.StoreErrors.Load() != tc.storeErrs || s.BadInput.Load() != tc.badInput {
						t.Errorf("answer %v, %d store errors, %d bad input; want %v, %d, %d", o.Answer, s.StoreErrors.Load(), s.BadInput.Load(), tc.want, tc.storeErrs, tc.badInput)
					}
					if tc.want == pipeline.Unavailable {
						if names := q.Unavailable(); len(names) != 1 || names[0] != lim.Name || s.FailedClosed.Load() != 1 {
							t.Errorf("unavailable names %v, %d failed closed", names, s.FailedClosed.Load())
						}
					}
					wantOpen := uint64(0)
					if tc.want == pipeline.Pass && policy == distributed.FailOpen {
						wantOpen = 1
					}
					if s.FailedOpen.Load() != wantOpen {
						t.Errorf("%d failed open, want %d", s.FailedOpen.Load(), wantOpen)
					}
					if charged := step == "rate" && (policy == distributed.FailLocal && tc.name == "unavailable"); q.Charged() != charged {
						t.Errorf("Charged %v, want %v: a cost is settled only where it was charged", q.Charged(), charged)
					}
					if policy == distributed.FailLocal && tc.name == "unavailable" && (!o.Decided && step == "rate" || s.Allowed.Load() != 1) {
						t.Errorf("local: decided %v, %d allowed", o.Decided, s.Allowed.Load())
					}
					if tc.name == "unavailable" {
						recs := logs.Records(t, "test: the store could not decide")
						if len(recs) != 1 || recs[0]["level"] != "WARN" || recs[0]["failure"] != policy.String() {
							t.Errorf("log %v", recs)
						}
					}
					if tc.name == "canceled" && strings.Contains(logs.String(), "store") {
						t.Errorf("a canceled request logged as a store failure: %s", logs.String())
					}
				})
			}
		}
	}
}

// TestValidationPaths: every problem names the limit by the path the transport gave it and
// wraps a *sluice.FieldError naming the field inside; the limits at fault are left out, the
// others kept.
func TestValidationPaths(t *testing.T) {
	st := newMemory(t, sluicetest.NewManualClock(t0))
	limits := []pipeline.Limit{
		{Name: "ok", Rule: sluice.PerMinute(1)},
		{Name: "", Rule: sluice.PerMinute(1)},
		{Name: "bad", Rule: sluice.PerMinute(0)},
		{Name: "ok", Rule: sluice.PerMinute(1)},            // twice in its group
		{Name: "ok", Rule: sluice.PerMinute(2)},            // another group, another rule
		{Name: "in", InFlight: &sluice.InFlight{Limit: 0}}, // no slot
		{Name: "alone", Rule: sluice.PerMinute(3)},         // another group
	}
	paths := []string{"routes[0].limits[0]", "routes[0].limits[1]", "routes[0].limits[2]", "routes[0].limits[3]",
		"routes[1].limits[0]", "routes[1].limits[1]", "routes[1].limits[2]"}
	p, err := pipeline.New(pipeline.Config{Name: "test", Limiter: sluice.New(st)}, limits, paths, [][]int{{0, 1, 2, 3}, {4, 5, 6}}, 0)
	for _, want := range []struct{ text, field string }{
		{"routes[0].limits[1].name: ", "name"},
		{`routes[0].limits[2] ("bad").rule: `, "limit"},
		{"routes[0].limits[3].name: ", "name"},
		{"routes[1].limits[0].rule: ", "rule"},
		{`routes[1].limits[1] ("in").in_flight: `, "max_in_flight"},
	} {
		var found bool
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var le *pipeline.LimitError
			var fe *sluice.FieldError
			if errors.As(e, &le) && strings.HasPrefix(le.Error(), want.text) && errors.As(e, &fe) && fe.Field == want.field {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem %q on field %q in %v", want.text, want.field, err)
		}
	}
	if kept := p.Kept(); len(kept) != 2 || kept[0] != 0 || kept[1] != 6 {
		t.Errorf("kept %v, want [0 6]", kept)
	}
}
