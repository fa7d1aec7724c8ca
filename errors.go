package sluice

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by Sluice and its stores wraps one of these, so callers
// can tell a bad request (fix the caller) from an unavailable store (fail open, closed, or fall
// back) with errors.Is.
var (
	// ErrInvalidRule reports a rule that cannot be enforced. Validation errors are a
	// *FieldError wrapping it (or ErrInvalidKey, ErrInvalidN), which names the field.
	ErrInvalidRule = errors.New("sluice: invalid rule")
	// ErrInvalidKey reports an empty key or one longer than the configured maximum.
	ErrInvalidKey = errors.New("sluice: invalid key")
	// ErrInvalidN reports a cost that cannot be applied (for example a refund of a scheduled
	// slot the algorithm cannot undo).
	ErrInvalidN = errors.New("sluice: invalid n")
	// ErrNoStore reports a Limiter built with a nil Store.
	ErrNoStore = errors.New("sluice: nil store")
	// ErrStoreUnavailable reports that the store could not be reached or did not answer in
	// time. Stores wrap their transport errors with it. A decision was not made.
	ErrStoreUnavailable = errors.New("sluice: store unavailable")
	// ErrWaitTooLong reports that Wait would have to wait longer than the context deadline or
	// the configured maximum queueing delay allows; nothing was consumed.
	ErrWaitTooLong = errors.New("sluice: wait would exceed the allowed delay")
	// ErrNoLeaser reports Leases.Acquire on a store that keeps no leases (not a Leaser).
	ErrNoLeaser = errors.New("sluice: the store keeps no leases")
	// ErrClosed reports use of a store or decorator after Close.
	ErrClosed = errors.New("sluice: closed")
	// ErrNoReservation reports an extension or a commit of a reservation the key does not
	// hold open: an unknown id, one already committed or cancelled, or one that expired. The
	// step moved no budget. It comes as a *FieldError naming "id".
	ErrNoReservation = errors.New("sluice: no such reservation")
)

// FieldError is a validation error that names the field at fault: the rule's, request's or
// counter batch's field (such as "limit", "period", "key", "n"), and why it is wrong. It
// wraps one of the sentinels ErrInvalidRule, ErrInvalidKey, ErrInvalidN or ErrNoReservation, so errors.Is
// works as for any other error of this package; callers that need the field (to point at
// their own name for it, as package config does) read it with errors.As.
type FieldError struct {
	// Field is the field's snake_case name, as in JSON and config files.
	Field string
	// Reason says what is wrong with it, including the offending value.
	Reason string
	// Err is the sentinel the error wraps.
	Err error
}

// Error returns "<sentinel>: <field>: <reason>", e.g. "sluice: invalid rule: limit: must be
// positive, got 0" ("sluice: invalid: ..." when Err is nil).
func (e *FieldError) Error() string {
	prefix := "sluice: invalid"
	if e.Err != nil {
		prefix = e.Err.Error()
	}
	return prefix + ": " + e.Field + ": " + e.Reason
}

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldError returns a *FieldError wrapping sentinel, its reason formatted from format and
// args.
func fieldError(sentinel error, field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: sentinel}
}

// IsUnavailable reports whether err means the store could not decide (as opposed to bad
// input), so the caller should apply its failure policy.
func IsUnavailable(err error) bool { return errors.Is(err, ErrStoreUnavailable) }
