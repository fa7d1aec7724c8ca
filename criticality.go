package sluice

import (
	"fmt"
	"strings"
)

// Criticality is how important a request is when a limit is reached (Google SRE's classes):
// each class may use only its share of a rule's capacity, so under pressure the lowest
// classes are refused first while the higher ones keep a holdback, all on one shared counter.
// The zero value is Critical, the default class.
type Criticality uint8

// The classes, from the default up and then down. Their default shares are DefaultShares.
const (
	Critical      Criticality = iota // the default: up to 90% of the capacity
	CriticalPlus                     // up to 100%
	SheddablePlus                    // up to 75%
	Sheddable                        // up to 50%
	numCriticalities
)

var criticalityNames = [numCriticalities]string{"CRITICAL", "CRITICAL_PLUS", "SHEDDABLE_PLUS", "SHEDDABLE"}

// String returns the class's name, e.g. "SHEDDABLE_PLUS".
func (c Criticality) String() string {
	if c < numCriticalities {
		return criticalityNames[c]
	}
	return fmt.Sprintf("Criticality(%d)", uint8(c))
}

// Criticalities returns the classes, most important first.
func Criticalities() []Criticality {
	return []Criticality{CriticalPlus, Critical, SheddablePlus, Sheddable}
}

// ParseCriticality reads a class name, case-insensitively ("critical_plus", "SHEDDABLE").
// An unknown name is Critical, the default, with ok false: the caller decides whether to log
// it; it must not be an error a client could use to skip its class.
func ParseCriticality(s string) (c Criticality, ok bool) {
	for i, n := range criticalityNames {
		if strings.EqualFold(s, n) {
			return Criticality(i), true
		}
	}
	return Critical, false
}

// Shares are the fractions of a rule's capacity each class may use, indexed by Criticality
// (one for each of the four classes). Each is in (0, 1]; the zero Shares is DefaultShares.
type Shares [4]float64

// Shares has one entry per class: this fails to compile when a class is added or removed.
const _ = uint(int(numCriticalities)-len(Shares{})) + uint(len(Shares{})-int(numCriticalities))

// DefaultShares: CRITICAL_PLUS 100%, CRITICAL 90%, SHEDDABLE_PLUS 75%, SHEDDABLE 50%.
var DefaultShares = Shares{Critical: 0.9, CriticalPlus: 1, SheddablePlus: 0.75, Sheddable: 0.5}

// Validate checks every share is in (0, 1], naming the class at fault.
func (s Shares) Validate() error {
	if s == (Shares{}) {
		return nil
	}
	for c, v := range s {
		if !(v > 0 && v <= 1) {
			return fieldError(ErrInvalidRule, "shares."+strings.ToLower(Criticality(c).String()), "must be in (0, 1], got %v", v)
		}
	}
	return nil
}

// Holdback is what a request of class c must leave of capacity: capacity minus the class's
// share, rounded down to whole units, so a request is admitted only if at least Holdback units
// remain after it (Request.Holdback).
func (s Shares) Holdback(c Criticality, capacity int64) int64 {
	if s == (Shares{}) {
		s = DefaultShares
	}
	if c >= numCriticalities {
		c = Critical
	}
	return capacity - int64(s[c]*float64(capacity))
}
