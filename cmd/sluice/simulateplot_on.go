//go:build plot

package main

import "github.com/sluicehq/sluice/simulate/figures"

func init() { writePlots, writeBudgetPlots = figures.Write, figures.WriteBudget }
