package sluice

import "errors"

// Sentinel errors. Every error returned by Sluice and its stores wraps one of these, so callers
// can tell a bad request (fix the caller) from an unavailable store (fail open, closed, or fall
// back) with errors.Is.
var (
	// ErrInvalidRule reports a rule that cannot be enforced; the message names the field.
	ErrInvalidRule = errors.New("sluice: invalid rule")
	// ErrInvalidKey reports an empty key or one longer than the configured maximum.
	ErrInvalidKey = errors.New("sluice: invalid key")
	// ErrInvalidN reports a cost that cannot be applied (for example a refund of a reservation
	// the algorithm cannot undo).
	ErrInvalidN = errors.New("sluice: invalid n")
	// ErrNoStore reports a Limiter built with a nil Store.
	ErrNoStore = errors.New("sluice: nil store")
	// ErrStoreUnavailable reports that the store could not be reached or did not answer in
	// time. Stores wrap their transport errors with it. A decision was not made.
	ErrStoreUnavailable = errors.New("sluice: store unavailable")
	// ErrWaitTooLong reports that Wait would have to wait longer than the context deadline or
	// the configured maximum queueing delay allows; nothing was consumed.
	ErrWaitTooLong = errors.New("sluice: wait would exceed the allowed delay")
	// ErrClosed reports use of a store or decorator after Close.
	ErrClosed = errors.New("sluice: closed")
)
