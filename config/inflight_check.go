package config

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// checkInFlight checks a concurrency limit as the library does (sluice.InFlight.Validate).
func checkInFlight(limit int64, lease time.Duration) error {
	return sluice.InFlight{Limit: limit, Lease: lease}.Validate()
}

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
