// Package regions shares a global limit between regions, each deciding on its own store
// (its own Redis) with no cross-region call on the decision path: a Store for the keys whose
// limit is the whole fleet's, in every region (a rules file's scope: global).
//
// Escrow mode (the default) never admits more than the limit, even while a region is cut
// off. Each region holds a share of each key's limit and decides locally under the rule
// scaled to it; the shares are allocated per epoch (Config.Epoch, one epoch ahead) by max-min
// fairness over the regions' demands (package quota/alloc), through a Coordinator that every
// region reads and that no request waits on. Each epoch is allocated once, by
// compare-and-set, so every region reads the same shares of it. A share one region gives up
// goes to another only once nothing the first admitted under it can still count against the
// rule: one period for the window algorithms, the time to refill the burst for the buckets
// (the rule's memory), plus Config.MaxClockSkew. A region cut off from the Coordinator decides
// on the epochs it has read, at most the current and the next one, and then on nothing: its
// share drains within two epochs and the skew, and returns to the others a memory later. The
// cost is denials while shares move (they move at the speed of the rule's memory), measured
// by `sluice simulate --scenario regions` (docs/MODES.md).
//
// Async mode counts windows (fixed_window, sliding_window) locally in each region, on
// distributed.Async's local view, and every Config.Interval adds this region's counts to its
// store and reads the same counters in every other region's store: a region sees the others'
// admissions late by at most about two intervals plus the time to read them, so a window
// admits at most about limit + the sum over the other regions of rate x (2 x interval +
// round trip) (docs/MODES.md has the measured figure). A region cut off counts the others as
// last read: the overshoot then grows with the cut.
package regions
