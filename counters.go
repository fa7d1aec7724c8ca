package sluice

import (
	"time"
)

// WindowCounts is one key's run of consecutive window counters in a WindowCounter call. Window
// w of length Length covers [w*Length, (w+1)*Length) since the Unix epoch, so every process
// names the same window the same way.
type WindowCounts struct {
	// Key is the user key the counters belong to; stores namespace it, and keep all counters
	// of one key together (one Redis Cluster slot).
	Key string
	// Length is the window length, a whole number of milliseconds.
	Length time.Duration
	// First is the index of the first window; the counters are First, First+1, ...
	First int64
	// Deltas holds one delta per window, added before the totals are read. A zero delta only
	// reads. Its length is the number of windows (at most MaxSubWindows+1).
	Deltas []int64
	// TTL is how long the counters live after this call; each call renews it.
	TTL time.Duration
	// Totals is filled in by the store: each window's total after its delta was added. It
	// must have the same length as Deltas (stores reuse it, they do not allocate it).
	Totals []int64
	// Err is filled in by the store when this item alone failed (bad input); a transport
	// failure of the whole call is the call's error instead.
	Err error
}

// Validate checks the item's key (non-empty, at most maxKeyLen bytes; 0 means
// DefaultMaxKeyLength), window length, TTL and slices. Stores call it on every item before
// touching state, and report its error in the item's Err.
func (w *WindowCounts) Validate(maxKeyLen int) error {
	if err := validateKey(w.Key, maxKeyLen); err != nil {
		return err
	}
	switch {
	case w.Length < MinPeriod || w.Length%time.Millisecond != 0:
		return fieldError(ErrInvalidRule, "length", "must be a whole number of milliseconds, got %v", w.Length)
	case w.TTL <= 0:
		return fieldError(ErrInvalidRule, "ttl", "must be positive, got %v", w.TTL)
	case len(w.Deltas) == 0 || len(w.Deltas) > MaxSubWindows+1:
		return fieldError(ErrInvalidN, "deltas", "want 1 to %d windows, got %d", MaxSubWindows+1, len(w.Deltas))
	case len(w.Totals) != len(w.Deltas):
		return fieldError(ErrInvalidN, "totals", "length %d, want %d (one per delta)", len(w.Totals), len(w.Deltas))
	}
	return nil
}
