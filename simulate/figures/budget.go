package figures

import (
	"fmt"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/simulate"
)

// WriteBudget draws the llm_budget scenario's figure into dir, as PNG and SVG, and returns the
// paths written: llm_budget, two panels against the concurrency (log scale), one line per
// policy: the tokens charged past the budget, and the share of denials that were needless.
func WriteBudget(dir string, rows []simulate.BudgetRow) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simulate: out: %w", err)
	}
	over := budgetPanel("tokens charged past the budget of 100,000", "tokens over", rows, func(r simulate.BudgetRow) float64 { return float64(r.Over) })
	needless := budgetPanel("needless denials (their real cost fitted)", "% of denials", rows, func(r simulate.BudgetRow) float64 {
		if r.Denied == 0 {
			return 0
		}
		return 100 * float64(r.Needless) / float64(r.Denied)
	})
	for _, p := range []*plot.Plot{over, needless} {
		if p == nil {
			return nil, nil
		}
	}
	fig := grid([]*plot.Plot{over, needless})
	fig.height = 3 * vg.Inch
	return fig.writeBoth(dir, simulate.LLMBudgetScenario)
}

// budgetPanel plots value of each policy's rows against log10 of their concurrency.
func budgetPanel(title, ylabel string, rows []simulate.BudgetRow, value func(simulate.BudgetRow) float64) *plot.Plot {
	p := regionsPlot(title, ylabel)
	p.X.Label.Text = "concurrent requests (log10)"
	for i, policy := range simulate.LLMBudgetPolicies {
		var pts plotter.XYs
		for _, r := range rows {
			if r.Policy == policy {
				pts = append(pts, plotter.XY{X: math.Log10(float64(r.Concurrency)), Y: value(r)})
			}
		}
		if len(pts) == 0 || addLine(p, pts, policy, nodeColors[i%len(nodeColors)]) != nil {
			continue
		}
	}
	return p
}
