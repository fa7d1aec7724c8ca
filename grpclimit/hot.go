package grpclimit

import (
	"fmt"

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
