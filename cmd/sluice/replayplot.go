package main

import "github.com/sluicehq/sluice/replay"

// writeReplayPlots draws replay --out's figures. It is nil in the default build, which links
// no plotting library: replayplot_on.go sets it when the binary is built with -tags plot.
var writeReplayPlots func(dir string, rep *replay.Report) ([]string, error)

// errNoReplayPlots is what replay --out says in a build without plotting.
const errNoReplayPlots = "sluice replay: --out: this binary was built without plotting; draw the figures with\n" +
	"  go run -tags plot ./cmd/sluice replay --out DIR [flags]"
