package figures

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/simulate"
)

// nodeColors tell the instances apart in the shares figure.
var nodeColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 255},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 255}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 255},
}

// sharesFigure draws the quota mode's shares of the sampled client's limit per instance
// against the max-min fair shares.
func sharesFigure(res *simulate.Result) (figure, error) {
	if len(res.Series.Shares) == 0 {
		return figure{}, nil
	}
	var lines []lineSpec
	for n, v := range res.Series.Shares {
		lines = append(lines, lineSpec{fmt.Sprint("instance ", n, " share"), v, nodeColors[n%len(nodeColors)]})
	}
	p, err := panel(res, "quota mode: shares of the busiest client's limit, per instance (dashed: max-min fair)", lines)
	if err != nil {
		return figure{}, err
	}
	p.Y.Label.Text = "share (units per period)"
	times := res.Series.Times
	for n, v := range res.Series.FairShares {
		pts := make(plotter.XYs, len(times))
		for i, t := range times {
			pts[i].X, pts[i].Y = t.Minutes(), float64(v[i])
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return figure{}, err
		}
		l.Color = nodeColors[n%len(nodeColors)]
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		l.Width = vg.Points(0.8)
		p.Add(l)
	}
	return grid([]*plot.Plot{p}), nil
}
