package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/simulate"
)

// writeRegionPlots draws the regions scenario's figure; nil without -tags plot.
var writeRegionPlots func(dir string, res *simulate.RegionsResult) ([]string, error)

// simulateRegions runs the regions scenario (one global limit, three regions) and prints a
// row per mode; with out, it draws the figure there too.
func simulateRegions(stdout, stderr io.Writer, seed uint64, out string) int {
	res, err := simulate.RunRegions(context.Background(), seed)
	if err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	if err := simulate.WriteRegions(stdout, res); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	if out != "" {
		return wrote(stderr)(writeRegionPlots(out, res))
	}
	return 0
}
