package httplimit

import (
	"net/http"
	"sync"

	"github.com/sluicehq/sluice"
)

// DefaultCriticalityHeader is the request header WithCriticalityHeader reads by default.
const DefaultCriticalityHeader = "X-Criticality"

// WithCriticalityHeader sets the request header carrying the request's criticality class
// (CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE; default DefaultCriticalityHeader). A
// request without it is CRITICAL; an unknown value is CRITICAL too, logged once. Only the
// policies with Limit.Shares use the class.
func WithCriticalityHeader(name string) Option {
	return optionFunc(func(m *middleware) { m.classHeader = http.CanonicalHeaderKey(name) })
}

// classState is the middleware's criticality settings.
type classState struct {
	classHeader string
	unknownOnce sync.Once
}

// class reads r's criticality class.
func (m *middleware) class(r *http.Request) sluice.Criticality {
	name := m.classHeader
	if name == "" {
		name = DefaultCriticalityHeader
	}
	v := r.Header.Get(name)
	if v == "" {
		return sluice.Critical
	}
	c, ok := sluice.ParseCriticality(v)
	if !ok {
		m.unknownOnce.Do(func() {
			m.log.Warn("httplimit: unknown criticality class, decided as CRITICAL (logged once)", "header", name, "value", v)
		})
	}
	return c
}
