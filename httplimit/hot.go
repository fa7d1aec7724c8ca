package httplimit

import (
	"net/http"

	"github.com/sluicehq/sluice/hotkey"
)

// KeyQuery counts requests by the first value of a query parameter, such as a product id: a
// parameter limited per value, usually with Limit.Hot. A request without it (or with an empty
// one) is not counted by the policy.
func KeyQuery(name string) Key {
	return KeyFunc(func(r *http.Request) (string, bool) {
		v := r.URL.Query().Get(name)
		return v, v != ""
	})
}

// buildHot builds the hot-parameter sketch of each policy with Limit.Hot (nil for others).
func (m *middleware) buildHot() error {
	m.hot = make([]*hotkey.Param, len(m.limits))
	for i, p := range m.limits {
		if p.Hot == nil {
			continue
		}
		cfg := *p.Hot
		if cfg.Clock == nil {
			cfg.Clock = m.clock
		}
		hp, err := hotkey.New(p.Rule, cfg)
		if err != nil {
			return err
		}
		m.hot[i] = hp
	}
	return nil
}
