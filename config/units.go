package config

import (
	"fmt"
	"strings"
	"time"
)

// Unit is an envoyproxy/ratelimit time unit. Its values are those of
// envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit.
type Unit int32

// The units, numbered as in the RLS v3 protocol.
const (
	UnitUnknown Unit = 0
	UnitSecond  Unit = 1
	UnitMinute  Unit = 2
	UnitHour    Unit = 3
	UnitDay     Unit = 4
	UnitMonth   Unit = 5
	UnitYear    Unit = 6
	UnitWeek    Unit = 7
)

var units = []struct {
	unit Unit
	name string
	d    time.Duration
}{
	{UnitYear, "year", 365 * 24 * time.Hour},
	{UnitMonth, "month", 30 * 24 * time.Hour},
	{UnitWeek, "week", 7 * 24 * time.Hour},
	{UnitDay, "day", 24 * time.Hour},
	{UnitHour, "hour", time.Hour},
	{UnitMinute, "minute", time.Minute},
	{UnitSecond, "second", time.Second},
}

// ParseUnit returns the unit with the given name (case-insensitive, as envoyproxy/ratelimit).
func ParseUnit(name string) (Unit, error) {
	for _, u := range units {
		if strings.EqualFold(u.name, name) {
			return u.unit, nil
		}
	}
	return UnitUnknown, fmt.Errorf("unknown unit %q (want second, minute, hour, day, week, month or year)", name)
}

// Duration returns the unit's length: a month is 30 days and a year 365 days, as in
// envoyproxy/ratelimit. It is 0 for UnitUnknown.
func (u Unit) Duration() time.Duration {
	for _, x := range units {
		if x.unit == u {
			return x.d
		}
	}
	return 0
}

// String returns the unit's lower-case name.
func (u Unit) String() string {
	for _, x := range units {
		if x.unit == u {
			return x.name
		}
	}
	return "unknown"
}

// UnitOf expresses a period as a whole number of the largest unit that divides it, for the
// RLS response's current_limit: 30s is (second, 30), 2h is (hour, 2). A period that is not
// a whole number of seconds gives (UnitUnknown, 0).
func UnitOf(period time.Duration) (Unit, uint32) {
	for _, u := range units {
		if period >= u.d && period%u.d == 0 {
			return u.unit, uint32(period / u.d)
		}
	}
	return UnitUnknown, 0
}
