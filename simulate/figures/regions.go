package figures

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/simulate"
)

// WriteRegions draws the regions scenario's figure into dir (created if missing) as
// regions.png and regions.svg, and returns the paths written: above, the units each mode
// admitted per window against the limit, the cut marked; below, escrow's share of each region
// over time.
func WriteRegions(dir string, res *simulate.RegionsResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simulate: out: %w", err)
	}
	admitted, err := regionsAdmitted(res)
	if err != nil {
		return nil, err
	}
	shares, err := regionsShares(res)
	if err != nil {
		return nil, err
	}
	fig := figure{plots: [][]*plot.Plot{{admitted}, {shares}}, width: 9 * vg.Inch, height: 6 * vg.Inch}
	return fig.writeBoth(dir, "regions")
}

// writeBoth writes the figure into dir as name.png and name.svg and returns the paths written.
func (f figure) writeBoth(dir, name string) ([]string, error) {
	var paths []string
	for _, ext := range []string{".png", ".svg"} {
		p := filepath.Join(dir, name+ext)
		if err := f.write(p); err != nil {
			return paths, fmt.Errorf("simulate: plot %s: %w", name, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// regionsAdmitted plots the units admitted per window by each mode.
func regionsAdmitted(res *simulate.RegionsResult) (*plot.Plot, error) {
	p := regionsPlot("one global limit, three regions: units admitted per 10 s window (the region ap cut off between the dotted lines)", "units admitted in the window")
	for i, mode := range simulate.RegionModes {
		pts := make(plotter.XYs, 0, 2*len(res.Windows))
		for w, start := range res.Windows {
			end := start + (res.Windows[min(w+1, len(res.Windows)-1)] - start)
			if w == len(res.Windows)-1 && w > 0 {
				end = start + (start - res.Windows[w-1])
			}
			v := float64(res.Admitted[mode][w])
			pts = append(pts, plotter.XY{X: start.Seconds(), Y: v}, plotter.XY{X: end.Seconds(), Y: v})
		}
		if err := addLine(p, pts, mode, nodeColors[i%len(nodeColors)]); err != nil {
			return nil, err
		}
	}
	if err := hline(p, float64(res.Limit), res.Windows[len(res.Windows)-1].Seconds()+10, "limit"); err != nil {
		return nil, err
	}
	return p, cutLines(p, res)
}

// regionsShares plots escrow's share of each region.
func regionsShares(res *simulate.RegionsResult) (*plot.Plot, error) {
	p := regionsPlot("escrow: each region's share of the limit (units per 10 s)", "share")
	for r, v := range res.Shares {
		pts := make(plotter.XYs, len(res.ShareTimes))
		for i, t := range res.ShareTimes {
			pts[i] = plotter.XY{X: t.Seconds(), Y: float64(v[i])}
		}
		if err := addLine(p, pts, []string{"eu", "us", "ap"}[r%3], nodeColors[r%len(nodeColors)]); err != nil {
			return nil, err
		}
	}
	return p, cutLines(p, res)
}

// addLine adds a named line through pts to p.
func addLine(p *plot.Plot, pts plotter.XYs, name string, c color.Color) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.1)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func regionsPlot(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = y
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	return p
}

// hline draws a horizontal line at y up to x.
func hline(p *plot.Plot, y, x float64, name string) error {
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: x, Y: y}})
	if err != nil {
		return err
	}
	l.Color = limitColor
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// cutLines marks the cut's start and end.
func cutLines(p *plot.Plot, res *simulate.RegionsResult) error {
	top := float64(2 * res.Limit)
	for _, at := range res.Cut {
		l, err := plotter.NewLine(plotter.XYs{{X: at.Seconds(), Y: 0}, {X: at.Seconds(), Y: top}})
		if err != nil {
			return err
		}
		l.Color = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 255}
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(l)
	}
	return nil
}
