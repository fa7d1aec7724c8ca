package sluicetest

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice"
)

// GateStore holds every Take at a gate in front of another store until Release, for tests of
// what happens while a decision is in flight (a shutdown, a deadline). Each Take that finds
// the gate closed announces itself on Entered before it waits; Entered holds one
// announcement, so a second Take waits to announce until the first is received. A Take whose
// context ends at the gate returns the context's error without reaching the store. It is
// safe for concurrent use.
type GateStore struct {
	store   sluice.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewGateStore returns a closed gate in front of store.
func NewGateStore(store sluice.Store) *GateStore {
	return &GateStore{store: store, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

// Entered receives once for each Take that reached the gate.
func (g *GateStore) Entered() <-chan struct{} { return g.entered }

// Release opens the gate for good: the Takes held pass to the store, and later ones pass
// without announcing themselves.
func (g *GateStore) Release() { g.once.Do(func() { close(g.release) }) }

// Take waits at the gate, then passes req to the store.
func (g *GateStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	select {
	case <-g.release:
		return g.store.Take(ctx, req)
	default:
	}
	select {
	case g.entered <- struct{}{}:
	case <-ctx.Done():
		return sluice.Decision{}, ctx.Err()
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return sluice.Decision{}, ctx.Err()
	}
	return g.store.Take(ctx, req)
}
