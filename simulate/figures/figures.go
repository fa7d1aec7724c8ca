// Package figures draws the figures of a simulate.Result (docs/ACCURACY.md) and of a
// replay.Report as PNG and SVG. It is apart from packages simulate and replay so that the
// plotting libraries stay out of every build that does not draw: the sluice binary links it
// only when built with -tags plot.
package figures

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sluicehq/sluice/simulate"
)

// Write draws the result's figures into dir (created if missing), each as PNG and SVG,
// and returns the paths written:
//
//   - SCENARIO_counted_vs_perfect: the Criteo-style figure, one panel per counting algorithm:
//     what the algorithm counts of the busiest client's requests against the perfect sliding
//     window count of the same requests, with the limit;
//   - SCENARIO_admitted: one panel per algorithm (first mode): the exact number of units it
//     admitted for that client in the trailing period, with the limit;
//   - SCENARIO_over_admission: a bar per row, the over_admission metric;
//   - SCENARIO_quota_shares (with a quota mode): each instance's assigned share of the
//     client's limit over time (solid) against its max-min fair share (dashed).
func Write(dir string, res *simulate.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simulate: out: %w", err)
	}
	figures := []struct {
		name  string
		build func(*simulate.Result) (figure, error)
	}{
		{"counted_vs_perfect", countedFigure},
		{"admitted", admittedFigure},
		{"over_admission", overAdmissionFigure},
		{"quota_shares", sharesFigure},
	}
	var paths []string
	for _, f := range figures {
		fig, err := f.build(res)
		if err != nil {
			return paths, fmt.Errorf("simulate: plot %s: %w", f.name, err)
		}
		if fig.plots == nil {
			continue
		}
		base := filepath.Join(dir, res.Scenario+"_"+f.name)
		for _, ext := range []string{".png", ".svg"} {
			if err := fig.write(base + ext); err != nil {
				return paths, fmt.Errorf("simulate: plot %s: %w", f.name, err)
			}
			paths = append(paths, base+ext)
		}
	}
	return paths, nil
}

// figure is a grid of plots.
type figure struct {
	plots         [][]*plot.Plot
	width, height vg.Length
}

func (f figure) draw(c vg.CanvasSizer) {
	w, h := c.Size()
	dc := draw.NewCanvas(c, w, h)
	rows, cols := len(f.plots), len(f.plots[0])
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(f.plots, tiles, dc)
	for i := range f.plots {
		for j, p := range f.plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
}

func (f figure) write(path string) error {
	var wt io.WriterTo
	if filepath.Ext(path) == ".svg" {
		c := vgsvg.New(f.width, f.height)
		f.draw(c)
		wt = c
	} else {
		c := vgimg.New(f.width, f.height)
		f.draw(c)
		wt = vgimg.PngCanvas{Canvas: c}
	}
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

var (
	perfectColor = color.RGBA{A: 255}
	countedColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}
	limitColor   = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 255}
)

// grid lays panels out two per row; an odd last cell is left empty.
func grid(panels []*plot.Plot) figure {
	cols := 2
	if len(panels) == 1 {
		cols = 1
	}
	rows := (len(panels) + cols - 1) / cols
	out := make([][]*plot.Plot, rows)
	for i := range out {
		out[i] = make([]*plot.Plot, cols)
		for j := range out[i] {
			if k := i*cols + j; k < len(panels) {
				out[i][j] = panels[k]
			} else {
				out[i][j] = plot.New() // an empty cell keeps the grid aligned
				out[i][j].HideAxes()
			}
		}
	}
	return figure{plots: out, width: 9 * vg.Inch, height: vg.Length(rows) * 2.1 * vg.Inch}
}

// panel returns a time-series plot with the given lines and the limit.
func panel(res *simulate.Result, title string, lines []lineSpec) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "minutes"
	p.Y.Label.Text = "units in trailing period"
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.Y.Min = 0
	times := res.Series.Times
	for _, l := range lines {
		pts := make(plotter.XYs, len(times))
		for i, t := range times {
			pts[i].X = t.Minutes()
			pts[i].Y = float64(l.values[i])
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color = l.color
		line.Width = vg.Points(1)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	if len(times) > 0 {
		limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(res.Limit)},
			{X: times[len(times)-1].Minutes(), Y: float64(res.Limit)}})
		if err != nil {
			return nil, err
		}
		limit.Color = limitColor
		limit.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(limit)
		p.Legend.Add("limit", limit)
	}
	return p, nil
}

type lineSpec struct {
	name   string
	values []int64
	color  color.Color
}

func countedFigure(res *simulate.Result) (figure, error) {
	var panels []*plot.Plot
	for _, s := range res.Series.Counted {
		p, err := panel(res, s.Name+": counted vs perfect (all requests)", []lineSpec{
			{"perfect sliding window", res.Series.Offered, perfectColor},
			{s.Name, s.Values, countedColor},
		})
		if err != nil {
			return figure{}, err
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return figure{}, nil
	}
	return grid(panels), nil
}

func admittedFigure(res *simulate.Result) (figure, error) {
	var panels []*plot.Plot
	for _, s := range res.Series.Admitted {
		p, err := panel(res, s.Name+": admitted in trailing period", []lineSpec{
			{"admitted (exact count)", s.Values, countedColor},
		})
		if err != nil {
			return figure{}, err
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return figure{}, nil
	}
	return grid(panels), nil
}

func overAdmissionFigure(res *simulate.Result) (figure, error) {
	if len(res.Rows) == 0 {
		return figure{}, nil
	}
	modes := map[string]bool{}
	for _, r := range res.Rows {
		modes[rowMode(r)] = true
	}
	values := make(plotter.Values, len(res.Rows))
	labels := make([]string, len(res.Rows))
	top := 1.0
	for i, r := range res.Rows {
		// Horizontal bars are drawn bottom-up: reverse so the first row is on top.
		k := len(res.Rows) - 1 - i
		values[k] = r.OverAdmission
		labels[k] = r.Algorithm
		if len(modes) > 1 {
			labels[k] += " / " + rowMode(r)
		}
		top = max(top, r.OverAdmission)
	}
	p := plot.New()
	p.Title.Text = res.Scenario + ": over_admission (most admitted in any trailing period / limit)"
	p.Title.TextStyle.Font.Size = vg.Points(9)
	bars, err := plotter.NewBarChart(values, vg.Points(10))
	if err != nil {
		return figure{}, err
	}
	bars.Horizontal = true
	bars.Color = countedColor
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(labels...)
	p.X.Min, p.X.Max = 0, top*1.1
	p.X.Label.Text = "over_admission (1 = exact)"
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(values)) - 0.5}})
	if err != nil {
		return figure{}, err
	}
	one.Color = perfectColor
	one.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(one)
	h := vg.Length(len(values))*vg.Points(16) + vg.Inch
	return figure{plots: [][]*plot.Plot{{p}}, width: 7 * vg.Inch, height: h}, nil
}

func rowMode(r simulate.Row) string {
	if r.Routing == "-" || r.Routing == "" {
		return r.Mode
	}
	return fmt.Sprintf("%s x%d %s", r.Mode, r.Nodes, r.Routing)
}
