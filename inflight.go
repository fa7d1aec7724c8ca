package sluice

import (
	"context"
	"encoding/hex"
	"strconv"
	"time"
)

// Defaults and bounds of an InFlight limit.
const (
	// DefaultLease is the lease of an InFlight limit whose Lease is 0: a holder that dies
	// without releasing (kill -9, a lost network) gives its slot back within this time.
	DefaultLease = 10 * time.Second
	// MinLease and MaxLease bound InFlight.Lease.
	MinLease = 10 * time.Millisecond
	MaxLease = 24 * time.Hour
)

// InFlight is a concurrency limit: at most Limit slots of a key held at once, across every
// process sharing the store. Each admission is a lease that lives for Lease unless renewed;
// the Leases that acquired it renews it while it is held (Leases.Acquire), so a slot held by
// a process that dies comes back within Lease. The zero Lease is DefaultLease.
type InFlight struct {
	// Limit is the most slots held at once. 1 to MaxLimit.
	Limit int64
	// Lease is how long a slot stays held without renewal. 0 means DefaultLease; otherwise
	// MinLease to MaxLease.
	Lease time.Duration
}

// Validate checks the limit and the lease, naming the field at fault ("max_in_flight",
// "lease") in a *FieldError wrapping ErrInvalidRule.
func (f InFlight) Validate() error {
	if f.Limit <= 0 || f.Limit > MaxLimit {
		return fieldError(ErrInvalidRule, "max_in_flight", "must be between 1 and %d, got %d", int64(MaxLimit), f.Limit)
	}
	if f.Lease != 0 && (f.Lease < MinLease || f.Lease > MaxLease) {
		return fieldError(ErrInvalidRule, "lease", "must be between %v and %v (0 for %v), got %v", MinLease, MaxLease, DefaultLease, f.Lease)
	}
	return nil
}

// LeaseTime returns the lease, DefaultLease when Lease is 0.
func (f InFlight) LeaseTime() time.Duration {
	if f.Lease == 0 {
		return DefaultLease
	}
	return f.Lease
}

// String returns e.g. "10 in flight (lease 10s)".
func (f InFlight) String() string {
	return strconv.FormatInt(f.Limit, 10) + " in flight (lease " + f.LeaseTime().String() + ")"
}

// LeaseID names one lease: unique across processes (a random per-Limiter prefix and a
// counter), so a release or renewal can only ever touch the lease it names.
type LeaseID [16]byte

// String returns the id in hexadecimal.
func (id LeaseID) String() string { return hex.EncodeToString(id[:]) }

// LeaseRequest asks a Leaser for one slot of Key under Limit, held as lease ID.
type LeaseRequest struct {
	// Key names the set of slots. Non-empty, at most the store's maximum key length. The
	// leases of a key are apart from its rate-limit state: the same key may carry both.
	Key string
	// InFlight is the concurrency limit (validated by the store).
	InFlight InFlight
	// ID names the new lease (Leases.Acquire makes a fresh one per request).
	ID LeaseID
	// Holdback, when positive, is how many slots must stay free after this one for it to be
	// admitted (criticality: Shares.Holdback of the request's class), so a lower class cannot
	// take the last slots the classes above it keep. 0 to Limit.
	Holdback int64
	// Criticality is the request's class, for decorators that need it; stores decide by
	// Holdback.
	Criticality Criticality
}

// Validate checks the key (maxKeyLen as for Request.Validate), the limit and the holdback.
func (r *LeaseRequest) Validate(maxKeyLen int) error {
	if err := validateKey(r.Key, maxKeyLen); err != nil {
		return err
	}
	if err := r.InFlight.Validate(); err != nil {
		return err
	}
	if r.Holdback < 0 || r.Holdback > r.InFlight.Limit {
		return fieldError(ErrInvalidN, "holdback", "must be between 0 and the limit %d, got %d", r.InFlight.Limit, r.Holdback)
	}
	return nil
}

// LeaseDecision is the outcome of one acquire. A refusal is a LeaseDecision with Admitted
// false, not an error.
type LeaseDecision struct {
	// Admitted reports whether a slot was taken (and the lease is now held).
	Admitted bool
	// Capacity is the concurrency limit.
	Capacity int64
	// InFlight is how many live leases the key holds after this decision (this one included
	// when admitted).
	InFlight int64
	// Remaining is how many more slots the request's class could take right now: Limit minus
	// the holdback minus InFlight, never below 0.
	Remaining int64
	// RetryAfter is 0 when admitted. When refused it is a hint: how long until the soonest
	// held lease expires unless renewed (a slot usually frees sooner, when its holder
	// releases it), or Never when the class can never be admitted (its holdback is the whole
	// limit).
	RetryAfter time.Duration
}

// LeaseRenewal is one lease of a renewal batch (Leaser.RenewLeases).
type LeaseRenewal struct {
	Key   string
	ID    LeaseID
	Lease time.Duration // the new expiry is now + Lease
	// Held is filled in: true if the lease was live and now expires Lease from now, false if
	// it had expired or been released (it is not brought back: its slot may be someone
	// else's by now).
	Held bool
	// Err is filled in for an item the store could not renew (its outcome unknown).
	Err error
}

// Validate checks the key (maxKeyLen as for Request.Validate) and the lease (MinLease to
// MaxLease).
func (r *LeaseRenewal) Validate(maxKeyLen int) error {
	if err := validateKey(r.Key, maxKeyLen); err != nil {
		return err
	}
	if r.Lease < MinLease || r.Lease > MaxLease {
		return fieldError(ErrInvalidRule, "lease", "must be between %v and %v, got %v", MinLease, MaxLease, r.Lease)
	}
	return nil
}

// Leaser is the optional capability behind concurrency limits (Leases.Acquire): slots held
// as leases with an expiry. Every Sluice store implements it beside Take; decorators pass it
// on. Implementations are safe for concurrent use, give every key they write a TTL, never
// count an expired lease as held, and never let the live leases of a key exceed its limit
// through an acquire.
type Leaser interface {
	// AcquireLease takes one slot of req.Key as lease req.ID if fewer than Limit - Holdback
	// live leases are held, in one atomic step (one round trip on a shared store). The lease
	// expires Limit.LeaseTime() from now unless renewed.
	AcquireLease(ctx context.Context, req LeaseRequest) (LeaseDecision, error)
	// RenewLeases extends every live lease of the batch and fills in Held (or Err), in one
	// round trip where the store allows it (Redis Cluster: one per node). An error wrapping
	// ErrStoreUnavailable means no item's outcome is known.
	RenewLeases(ctx context.Context, batch []LeaseRenewal) error
	// ReleaseLease frees lease id of key. It is idempotent: releasing a lease that was
	// released or has expired does nothing, and never frees another lease.
	ReleaseLease(ctx context.Context, key string, id LeaseID) error
}

// LeaseClearer is the optional capability of a Leaser to free every lease of a key at once:
// an operator's way out when holders died holding long leases (sluice proxy's admin endpoint
// DELETE /v1/leases). Every Sluice store implements it; decorators pass it on. The holders
// are not told: their renewals find the leases gone (Leases.Lost) and their releases do
// nothing.
type LeaseClearer interface {
	// ClearLeases removes every lease of key and returns how many were live.
	ClearLeases(ctx context.Context, key string) (int64, error)
}
