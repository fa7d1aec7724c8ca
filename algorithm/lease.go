package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// DecideLease decides one acquire of a concurrency limit (sluice.Leaser.AcquireLease) on a
// key holding live leases (expired ones already dropped), the soonest of which expires at
// soonest (Unix ns; ignored when live is 0), at now. A request is admitted when, after it,
// at least holdback slots stay free: live + 1 <= limit - holdback. The Redis store mirrors
// this in lua/lease_acquire.lua.
func DecideLease(limit, holdback, live, soonest, now int64) sluice.LeaseDecision {
	d := sluice.LeaseDecision{Capacity: limit, InFlight: live}
	room := limit - holdback
	switch {
	case live+1 <= room:
		d.Admitted = true
		d.InFlight = live + 1
	case room < 1:
		d.RetryAfter = sluice.Never
	default:
		d.RetryAfter = time.Duration(max(soonest-now, 1))
	}
	d.Remaining = max(0, room-d.InFlight)
	return d
}
