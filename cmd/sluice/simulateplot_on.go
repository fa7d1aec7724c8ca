//go:build plot

package main

import "github.com/sluicehq/sluice/simulate/figures"

func init() {
	writePlots, writeRegionPlots, writeBudgetPlots = figures.Write, figures.WriteRegions, figures.WriteBudget
}
