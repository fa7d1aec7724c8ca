package distributed

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// Every option is accepted by the constructors it applies to, and is an error naming the
// option and the constructor elsewhere.
func TestOptionApplies(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	s := newMemory(t, clock)
	ctors := map[string]func(...Option) (interface{ Close() error }, error){
		"NewOverLimit": func(o ...Option) (interface{ Close() error }, error) { return NewOverLimit(s, o...) },
		"NewAsync": func(o ...Option) (interface{ Close() error }, error) {
			return NewAsync(s, append(o, WithManualSync())...)
		},
		"NewFallback": func(o ...Option) (interface{ Close() error }, error) {
			return NewFallback(s, append(o, WithManualProbe())...)
		},
	}
	const o, a, f = "NewOverLimit", "NewAsync", "NewFallback"
	for _, c := range []struct {
		opt  Option
		name string
		to   []string
	}{
		{WithClock(clock), "WithClock", []string{o, a, f}},
		{WithTimeout(time.Second), "WithTimeout", []string{a, f}},
		{WithMaxKeys(10), "WithMaxKeys", []string{o, a, f}},
		{WithInterval(time.Second), "WithInterval", []string{a}},
		{WithMaxStaleness(time.Second), "WithMaxStaleness", []string{a}},
		{WithSyncWrites(), "WithSyncWrites", []string{a}},
		{WithManualSync(), "WithManualSync", []string{a}},
		{WithFailures(2), "WithFailures", []string{f}},
		{WithProbeInterval(time.Second), "WithProbeInterval", []string{f}},
		{WithHeartbeat(time.Second), "WithHeartbeat", []string{f}},
		{WithFailurePolicy(FailOpen), "WithFailurePolicy", []string{f}},
		{WithFailurePolicyFunc(func(sluice.Rule) FailurePolicy { return FailLocal }), "WithFailurePolicyFunc", []string{f}},
		{WithInstances(2), "WithInstances", []string{f}},
		{WithSafeCapacity(0.5), "WithSafeCapacity", []string{f}},
		{WithGroup("g"), "WithGroup", []string{f}},
		{WithInstanceID("i"), "WithInstanceID", []string{f}},
		{WithManualProbe(), "WithManualProbe", []string{f}},
		{OnCircuitChange(func(_, _ Circuit) {}), "OnCircuitChange", []string{f}},
		{OnStoreError(func(error) {}), "OnStoreError", []string{f}},
		{Option{}, "the zero Option", nil},
	} {
		for ctor, build := range ctors {
			applies := false
			for _, name := range c.to {
				applies = applies || name == ctor
			}
			d, err := build(c.opt)
			switch want := "distributed: " + ctor + ": " + c.name + " does not apply"; {
			case applies && err != nil:
				t.Errorf("%s(%s): %v", ctor, c.name, err)
			case !applies && (err == nil || err.Error() != want):
				t.Errorf("%s(%s): got %v, want %q", ctor, c.name, err, want)
			}
			if err == nil {
				d.Close()
			}
		}
	}
}
