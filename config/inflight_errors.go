package config

import (
	"errors"

	"github.com/sluicehq/sluice"
)

// addInFlightError reports a concurrency limit the library refuses under max_in_flight's
// own field names (limit, lease).
func (p *problems) addInFlightError(file string, line int, f string, err error) {
	var fe *sluice.FieldError
	if !errors.As(err, &fe) {
		p.add(file, line, f, "%v", err)
		return
	}
	field := fe.Field
	if field == "max_in_flight" {
		field = "limit"
	}
	p.add(file, line, f+"."+field, "%s", fe.Reason)
}
