package distributed

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/monotime"
)

// flushNext flushes s when it is a sluice.Flusher.
func flushNext(ctx context.Context, s sluice.Store) error {
	if f, ok := s.(sluice.Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// closeTimeout bounds the final flush of Close.
const closeTimeout = 5 * time.Second

// now reads c as Unix ns; a nil clock is the fast system clock.
func now(c sluice.Clock) int64 {
	if c == nil {
		return monotime.UnixNano()
	}
	return c.Now().UnixNano()
}
