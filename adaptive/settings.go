package adaptive

import (
	"errors"
	"math"
)

// Settings configure a Gradient. The zero value of each field is its documented default, so
// Settings{} is a usable limit between 1 and 1,000 starting at 20.
type Settings struct {
	// Floor is the lowest the limit goes (default 1).
	Floor int
	// Ceiling is the highest the limit goes (default 1,000, and never below Floor's default).
	Ceiling int
	// Initial is the limit before any sample (default 20, clamped to [Floor, Ceiling]).
	Initial int
	// ShortWindow is the number of samples the short round-trip average spans (default 10;
	// 1 makes it the last sample, as Gradient2 does).
	ShortWindow int
	// LongWindow is the number of samples the long round-trip average spans (default 600). It
	// must be longer than ShortWindow.
	LongWindow int
	// Tolerance is how much slower than the long average the short one may run before the
	// limit is cut (default 1.5; at least 1).
	Tolerance float64
	// Smoothing is the weight of a new estimate against the current limit, in (0, 1]
	// (default 0.2).
	Smoothing float64
	// Queue is the allowance added to the estimate on each sample, the room the limit keeps
	// probing for (default 4).
	Queue int
}

// withDefaults returns s with every zero field set to its default, and an error naming each
// field that cannot be used.
func (s Settings) withDefaults() (Settings, error) {
	var errs []error
	neg := func(field string, v int) {
		if v < 0 {
			errs = append(errs, settingsError(field, "must not be negative, got %d", v))
		}
	}
	neg("floor", s.Floor)
	neg("ceiling", s.Ceiling)
	neg("initial", s.Initial)
	neg("short_window", s.ShortWindow)
	neg("long_window", s.LongWindow)
	neg("queue", s.Queue)
	if s.Floor == 0 {
		s.Floor = 1
	}
	if s.Ceiling == 0 {
		s.Ceiling = max(1000, s.Floor)
	}
	if s.Ceiling > 0 && s.Floor > s.Ceiling {
		errs = append(errs, settingsError("ceiling", "must be at least floor (%d), got %d", s.Floor, s.Ceiling))
	}
	if s.Initial == 0 {
		s.Initial = 20
	}
	s.Initial = min(max(s.Initial, s.Floor), s.Ceiling)
	if s.ShortWindow == 0 {
		s.ShortWindow = 10
	}
	if s.LongWindow == 0 {
		s.LongWindow = max(600, 2*s.ShortWindow)
	}
	if s.ShortWindow > 0 && s.LongWindow > 0 && s.LongWindow <= s.ShortWindow {
		errs = append(errs, settingsError("long_window", "must be longer than short_window (%d), got %d", s.ShortWindow, s.LongWindow))
	}
	switch {
	case s.Tolerance == 0:
		s.Tolerance = 1.5
	case math.IsNaN(s.Tolerance) || math.IsInf(s.Tolerance, 0) || s.Tolerance < 1:
		errs = append(errs, settingsError("tolerance", "must be a number of at least 1, got %v", s.Tolerance))
	}
	switch {
	case s.Smoothing == 0:
		s.Smoothing = 0.2
	case math.IsNaN(s.Smoothing) || s.Smoothing < 0 || s.Smoothing > 1:
		errs = append(errs, settingsError("smoothing", "must be in (0, 1], got %v", s.Smoothing))
	}
	if s.Queue == 0 {
		s.Queue = 4
	}
	return s, errors.Join(errs...)
}

// Validate reports every field of s that cannot be used, each a *SettingsError (joined with
// errors.Join), or nil.
func (s Settings) Validate() error {
	_, err := s.withDefaults()
	return err
}
