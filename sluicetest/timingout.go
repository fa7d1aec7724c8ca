package sluicetest

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// TimingOutStore is a sluice.Store whose every Take fails as a store's does when its own
// timeout expires: with an error wrapping sluice.ErrStoreUnavailable and
// context.DeadlineExceeded, at once. A request for which Hang reports true instead waits
// until the caller's context ends and returns the context's error, as a store that the
// caller's own deadline cuts short. The zero value fails every Take at once; it is safe for
// concurrent use if Hang is.
type TimingOutStore struct {
	Hang func(req sluice.Request) bool
}

// Take implements sluice.Store.
func (s TimingOutStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if s.Hang != nil && s.Hang(req) {
		<-ctx.Done()
		return sluice.Decision{}, ctx.Err()
	}
	return sluice.Decision{}, fmt.Errorf("sluicetest: store timed out: %w: %w", sluice.ErrStoreUnavailable, context.DeadlineExceeded)
}
