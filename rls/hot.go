package rls

import (
	"context"

	"github.com/sluicehq/sluice/hotkey"
)

// hotItem is the sketch deciding the item, or nil: a hot parameter's descriptor taking units.
func hotItem(st *rules, it *item) *hotkey.Param {
	if it.overridden() || it.limit == nil || it.limit.Hot == nil || it.hits <= 0 || it.desc.IsNegativeHits {
		return nil
	}
	return st.limits[it.limit.Index].hot
}

// decideHot admits the cold values of hot parameters without a store call, and charges the
// store with the cold admissions of the values that turn hot before the group decides them.
// These are hotkey's protocol steps (Observe, Charge, then Denied in recordHot) taken per
// item: the engine answers a cold item itself (ColdDecision), so it does not use a
// hotkey.Batch.
func (e *Engine) decideHot(ctx context.Context, st *rules, sc *scratch) error {
	for i := range sc.items {
		it := &sc.items[i]
		p := hotItem(st, it)
		if p == nil {
			continue
		}
		v := p.Observe(it.key, it.hits)
		if v.Cold {
			it.decision, it.decided = p.ColdDecision(v, it.hits), true
			continue
		}
		if err := p.Charge(ctx, e.limiter, it.key, v); err != nil {
			return e.storeError(ctx, err)
		}
	}
	return nil
}

// recordHot tells the sketches which hot values the store denied.
func recordHot(st *rules, sc *scratch) {
	for i := range sc.items {
		if it := &sc.items[i]; it.over {
			if p := hotItem(st, it); p != nil {
				p.Denied(it.key)
			}
		}
	}
}
