package figures

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/replay"
)

// WriteReplay draws the figures of a replay.Report into dir (created if missing), each as
// PNG and SVG, and returns the paths written:
//
//   - LOG_denials: one panel per rule: the units requested and denied over time;
//   - LOG_rates: one panel per rule: the clients by their peak rate (the most units one asked
//     for in a trailing period), on a log scale, with the rule's limit.
//
// LOG is the log's file name without its extensions.
func WriteReplay(dir string, rep *replay.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replay: out: %w", err)
	}
	base := filepath.Base(rep.Log)
	if i := strings.IndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	var paths []string
	for _, f := range []struct {
		name  string
		build func(*replay.Report) (figure, error)
	}{{"denials", denialsFigure}, {"rates", ratesFigure}} {
		fig, err := f.build(rep)
		if err != nil {
			return paths, fmt.Errorf("replay: plot %s: %w", f.name, err)
		}
		if fig.plots == nil {
			continue
		}
		for _, ext := range []string{".png", ".svg"} {
			p := filepath.Join(dir, base+"_"+f.name+ext)
			if err := fig.write(p); err != nil {
				return paths, fmt.Errorf("replay: plot %s: %w", f.name, err)
			}
			paths = append(paths, p)
		}
	}
	return paths, nil
}

func ruleTitle(r *replay.RuleReport) string { return r.Rule + " (" + r.Limit + ")" }

func denialsFigure(rep *replay.Report) (figure, error) {
	var panels []*plot.Plot
	for i := range rep.Rules {
		r := &rep.Rules[i]
		if len(r.Series) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = ruleTitle(r) + ": requested and denied"
		p.Title.TextStyle.Font.Size = vg.Points(9)
		p.X.Label.Text = "minutes from " + rep.Start.Format("2006-01-02 15:04:05Z07:00")
		p.Y.Label.Text = fmt.Sprintf("units per %v", r.Series[0].Width)
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		p.Y.Min = 0
		for _, l := range []struct {
			name  string
			value func(replay.Point) int64
		}{{"requested", func(p replay.Point) int64 { return p.Requests }},
			{"denied", func(p replay.Point) int64 { return p.Denials }}} {
			pts := make(plotter.XYs, len(r.Series))
			for k, pt := range r.Series {
				pts[k].X = pt.At.Sub(rep.Start).Minutes()
				pts[k].Y = float64(l.value(pt))
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return figure{}, err
			}
			if l.name == "denied" {
				line.Color = countedColor
			} else {
				line.Color = perfectColor
			}
			line.Width = vg.Points(1)
			p.Add(line)
			p.Legend.Add(l.name, line)
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return figure{}, nil
	}
	return grid(panels), nil
}

func ratesFigure(rep *replay.Report) (figure, error) {
	var panels []*plot.Plot
	for i := range rep.Rules {
		r := &rep.Rules[i]
		if len(r.Rates) == 0 {
			continue
		}
		// Clients by power of two of their peak rate: bucket b holds rates in [2^b, 2^(b+1)).
		counts := map[int]float64{}
		top := 0
		for _, b := range r.Rates {
			k := 0
			if b.Rate > 0 {
				k = int(math.Log2(float64(b.Rate)))
			}
			counts[k] += float64(b.Clients)
			top = max(top, k)
		}
		values := make(plotter.Values, top+1)
		labels := make([]string, top+1)
		for k := range values {
			values[k] = counts[k]
			labels[k] = fmt.Sprint(int64(1) << k)
		}
		p := plot.New()
		p.Title.Text = ruleTitle(r) + ": clients by peak rate"
		p.Title.TextStyle.Font.Size = vg.Points(9)
		p.X.Label.Text = "peak units asked for in a trailing period (bucket from)"
		p.Y.Label.Text = "clients"
		bars, err := plotter.NewBarChart(values, vg.Points(8))
		if err != nil {
			return figure{}, err
		}
		bars.Color = perfectColor
		bars.LineStyle.Width = 0
		p.Add(bars)
		p.NominalX(labels...)
		if r.LimitUnits > 0 {
			x := math.Log2(float64(r.LimitUnits))
			limit, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: maxOf(values)}})
			if err != nil {
				return figure{}, err
			}
			limit.Color = countedColor
			limit.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(limit)
			p.Legend.Add(fmt.Sprintf("limit %d", r.LimitUnits), limit)
			p.Legend.Top = true
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return figure{}, nil
	}
	return grid(panels), nil
}

func maxOf(v plotter.Values) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
