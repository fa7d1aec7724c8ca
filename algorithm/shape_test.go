package algorithm_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

func TestWindowShape(t *testing.T) {
	for _, tc := range []struct {
		rule sluice.Rule
		want algorithm.Shape
	}{
		{sluice.FixedWindow(10, time.Minute), algorithm.Shape{Length: int64(time.Minute), Count: 1}},
		{sluice.SlidingWindow(10, time.Minute, 0), algorithm.Shape{Length: int64(time.Minute), Count: 2}},
		{sluice.SlidingWindow(10, time.Minute, 4),
			algorithm.Shape{Length: int64(15 * time.Second), Count: 5}},
		{sluice.TokenBucket(10, time.Second, 0), algorithm.Shape{Length: int64(time.Second), Count: 1}},
	} {
		if got := algorithm.WindowShape(tc.rule); got != tc.want {
			t.Errorf("WindowShape(%v) = %+v, want %+v", tc.rule, got, tc.want)
		}
	}
}

func TestRingIndex(t *testing.T) {
	for _, tc := range []struct {
		j, n int64
		want int
	}{
		{0, 1, 0}, {7, 1, 0}, {-7, 1, 0},
		{0, 5, 0}, {4, 5, 4}, {5, 5, 0}, {12, 5, 2},
		{-1, 5, 4}, {-5, 5, 0}, {-6, 5, 4},
	} {
		if got := algorithm.RingIndex(tc.j, tc.n); got != tc.want {
			t.Errorf("RingIndex(%d, %d) = %d, want %d", tc.j, tc.n, got, tc.want)
		}
	}
}
