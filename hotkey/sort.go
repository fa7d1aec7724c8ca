package hotkey

import (
	"cmp"
	"slices"
)

// sortValues orders values by rate, highest first, then by value.
func sortValues(vs []Value) {
	slices.SortFunc(vs, func(a, b Value) int {
		if c := cmp.Compare(b.Rate, a.Rate); c != 0 {
			return c
		}
		return cmp.Compare(a.Value, b.Value)
	})
}
