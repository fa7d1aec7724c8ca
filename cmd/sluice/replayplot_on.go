//go:build plot

package main

import "github.com/sluicehq/sluice/simulate/figures"

func init() { writeReplayPlots = figures.WriteReplay }
