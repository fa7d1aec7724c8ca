package grpclimit

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
)

// buildHot builds the sketch of every limit with Hot, one per limit name.
func (in *Interceptor) buildHot(routes []Route) error {
	for i, r := range routes {
		for j, l := range r.Limits {
			if l.Hot == nil || in.hot[l.Name] != nil {
				continue
			}
			cfg := *l.Hot
			if cfg.Clock == nil {
				cfg.Clock = in.cfg.clock
			}
			p, err := hotkey.New(l.Rule, cfg)
			if err != nil {
				return fmt.Errorf("grpclimit: routes[%d].limits[%d] (%q).hot: %w", i, j, l.Name, err)
			}
			if in.hot == nil {
				in.hot = map[string]*hotkey.Param{}
			}
			in.hot[l.Name] = p
		}
	}
	return nil
}

// coldHot reports whether the call's key of limit l is admitted cold (no check); for a hot
// key it first charges the store with the key's cold admissions.
func (in *Interceptor) coldHot(ctx context.Context, l Limit, key string, n int64) (bool, error) {
	p := in.hot[l.Name]
	if p == nil {
		return false, nil
	}
	v := p.Observe(key, n)
	if v.Cold {
		return true, nil
	}
	if v.Charge > 0 {
		if _, err := in.limiter.Settle(ctx, key, l.Rule, v.Charge); err != nil {
			return false, err
		}
	}
	return false, nil
}

// recordHot tells the sketches which hot keys the store denied.
func (in *Interceptor) recordHot(checks []sluice.Check) {
	for _, c := range checks {
		if c.Decision.Allowed {
			continue
		}
		if name, _, ok := strings.Cut(c.Key, ":"); ok && in.hot[name] != nil {
			in.hot[name].Tracker().Denied(c.Key)
		}
	}
}

// errHot is a store failure while charging a hot key, told apart from the key functions'
// errors.
type errHot struct{ err error }

func (e errHot) Error() string { return e.err.Error() }
