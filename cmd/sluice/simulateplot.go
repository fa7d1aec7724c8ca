package main

import "github.com/sluicehq/sluice/simulate"

// writePlots draws simulate --out's figures. It is nil in the default build, which links no
// plotting library (a third of a cold build's packages): simulateplot_on.go sets it when the
// binary is built with -tags plot.
var writePlots func(dir string, res *simulate.Result) ([]string, error)

// errNoPlots is what simulate --out says in a build without plotting.
const errNoPlots = "sluice simulate: --out: this binary was built without plotting; draw the figures with\n" +
	"  go run -tags plot ./cmd/sluice simulate --out DIR [flags]"
