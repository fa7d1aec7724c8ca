package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/store"
)

// storeCheckTimeout bounds the start-up check that the store answers.
const storeCheckTimeout = 3 * time.Second

// logStore logs the store the command decides on: its URL with any password masked, the
// mode and the fallback. sluice serve says more itself: until the store answers it is not
// ready, and says why every few seconds (server/storegate.go).
func logStore(log *slog.Logger, c store.Config) string {
	name := store.Redact(c.URL)
	if name == "" {
		name = "memory"
	}
	fallback := c.Fallback
	if fallback == "" {
		fallback = "none"
	}
	log.Info("store", "store", name, "mode", orDefault(c.Mode, "sync"), "fallback", fallback)
	return name
}

// announceStore logs the store (logStore) and, for a shared store, checks in the background
// that it answers, so a store that cannot be reached is said at once: a warning naming it and
// the error. The proxy serves either way (decisions fail, or the fallback decides, until the
// store answers; /readyz says not ready meanwhile). done is closed when the check is over.
func announceStore(log *slog.Logger, c store.Config) (done <-chan struct{}) {
	name := logStore(log, c)
	ch := make(chan struct{})
	if scheme, err := store.Scheme(c.URL); err != nil || scheme == "memory" {
		close(ch)
		return ch
	}
	go func() {
		defer close(ch)
		ctx, cancel := context.WithTimeout(context.Background(), storeCheckTimeout)
		defer cancel()
		_, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{URL: c.URL, Timeout: c.Timeout, Ping: true}})
		if err != nil {
			then := "decisions fail (503, UNAVAILABLE) until it answers"
			if c.Fallback != "" {
				then = "the fallback " + c.Fallback + " decides until it answers"
			}
			log.Warn("store unreachable at start: serving anyway; "+then+", and /readyz says not ready",
				"store", name, "err", err)
			return
		}
		_ = closer.Close()
	}()
	return ch
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
