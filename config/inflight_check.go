package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// checkInFlight checks a concurrency limit as the library does. (Until sluice.InFlight lands.)
func checkInFlight(limit int64, lease time.Duration) error {
	if limit <= 0 || limit > sluice.MaxLimit {
		return &sluice.FieldError{Field: "max_in_flight", Reason: fmt.Sprintf("must be between 1 and %d, got %d", int64(sluice.MaxLimit), limit), Err: sluice.ErrInvalidRule}
	}
	if lease != 0 && (lease < 10*time.Millisecond || lease > 24*time.Hour) {
		return &sluice.FieldError{Field: "lease", Reason: fmt.Sprintf("must be between 10ms and 24h0m0s, got %v", lease), Err: sluice.ErrInvalidRule}
	}
	return nil
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
