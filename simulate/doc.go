// Package simulate measures how accurately each Sluice algorithm and distribution mode limits
// traffic. It replays deterministic (seeded) traffic over virtual time — nothing sleeps: the
// algorithms and stores are given the instant of every request — and judges every decision
// against an exact reference, a perfect sliding log of the algorithm's own admitted requests.
//
// A run is a Scenario (a traffic trace and the rule every client is limited by), a list of
// Variants (an algorithm and its parameters) and a list of Modes (how many instances decide, over
// which store, with which request routing). Run returns one Row of metrics per variant and mode;
// WriteTable prints them as text, CSV or JSON, and package simulate/figures draws the
// figures of docs/ACCURACY.md. Command sluice simulate is the command-line front end.
//
// Everything is deterministic: the same scenario, seed and options give the same table.
package simulate
