package rls

// SetBuilt makes f run each time e has built a rules set, before the set is in force.
func SetBuilt(e *Engine, f func()) { e.built = f }
