package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// floorName is the contender whose server CPU the summary subtracts (bench/cmd/rlsfloor);
// redisFloorName the same floor waiting for a Redis round trip per request (rlsfloor -redis),
// subtracted too when it ran.
const (
	floorName      = "floor"
	redisFloorName = "floor-redis"
)

func tableCmd(args []string, w io.Writer) error {
	if len(args) == 0 {
		return errors.New("rlsload table: name at least one results file (JSON lines of rlsload run -out)")
	}
	var runs []Run
	for _, name := range args {
		rs, err := readRuns(name)
		if err != nil {
			return err
		}
		runs = append(runs, rs...)
	}
	if len(runs) == 0 {
		return errors.New("rlsload table: no runs in " + strings.Join(args, ", "))
	}
	writeTables(w, runs)
	return nil
}

func readRuns(name string) ([]Run, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("rlsload table: %w", err)
	}
	defer f.Close()
	var runs []Run
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r Run
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("rlsload table: %s line %d: %w", name, line, err)
		}
		runs = append(runs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rlsload table: %s: %w", name, err)
	}
	return runs, nil
}

// group is the runs of one contender in one scenario.
type group struct {
	scenario, contender string
	runs                []Run
}

// groups splits runs by scenario and contender, in the order each first appears.
func groups(runs []Run) []*group {
	var gs []*group
	for _, r := range runs {
		i := slices.IndexFunc(gs, func(g *group) bool { return g.scenario == r.Scenario && g.contender == r.Contender })
		if i < 0 {
			gs = append(gs, &group{scenario: r.Scenario, contender: r.Contender})
			i = len(gs) - 1
		}
		gs[i].runs = append(gs[i].runs, r)
	}
	return gs
}

// values is field f of every run that has it.
func (g *group) values(f func(Run) *float64) []float64 {
	var vs []float64
	for _, r := range g.runs {
		if v := f(r); v != nil {
			vs = append(vs, *v)
		}
	}
	return vs
}

// minMedian is the smallest and the median of vs (the mean of the middle two for an even
// count); ok is false for none.
func minMedian(vs []float64) (lo, med float64, ok bool) {
	if len(vs) == 0 {
		return 0, 0, false
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, true
}

func ptr(v float64) *float64 { return &v }

// decisionsPerScript is requests over script calls (each request is one decision): the
// contender's batch size. nil without script calls.
func decisionsPerScript(r Run) *float64 {
	if r.ScriptCalls == nil || *r.ScriptCalls == 0 {
		return nil
	}
	return ptr(1 / *r.ScriptCalls)
}

func writeTables(w io.Writer, runs []Run) {
	fmt.Fprintln(w, "Every run (per request: CPU in µs, Redis commandstats usec and calls):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | contender | round | requests/s | p50 / p99 ms | server CPU | Redis CPU | script usec | other cmd usec | script calls | other cmds | decisions / script call | over limit | errors | load avg |")
	fmt.Fprintln(w, "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range runs {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %.2f / %.2f | %s | %s | %s | %s | %s | %s | %s | %s%% | %d | %s |\n",
			r.Scenario, r.Contender, r.Round, thousands(r.PerSecond), r.P50us/1000, r.P99us/1000,
			num(r.ServerCPUus, 1), num(r.RedisCPUus, 2), num(r.ScriptUsec, 2), num(r.OtherUsec, 2),
			num(r.ScriptCalls, 3), num(r.OtherCalls, 3), num(decisionsPerScript(r), 1),
			pct(r.OverLimit, r.Requests), r.Errors, r.LoadAvg)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Per contender and scenario, min / median over the rounds (requests/s: median and range; above the floor: the median server CPU less the floor's median in the same scenario):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | contender | runs | requests/s | server CPU µs/req | above the floor | Redis CPU µs/req | script usec/req | other cmd usec/req | decisions / script call | errors |")
	fmt.Fprintln(w, "|---|---|---:|---|---|---|---|---|---|---|---:|")
	gs := groups(runs)
	for _, g := range gs {
		var errs int64
		for _, r := range g.runs {
			errs += r.Errors
		}
		rps := g.values(func(r Run) *float64 { return ptr(r.PerSecond) })
		lo, med, _ := minMedian(rps)
		fmt.Fprintf(w, "| %s | %s | %d | %s (%s–%s) | %s | %s | %s | %s | %s | %s | %d |\n",
			g.scenario, g.contender, len(g.runs), thousands(med), thousands(lo), thousands(slices.Max(rps)),
			minMed(g.values(func(r Run) *float64 { return r.ServerCPUus }), 1),
			aboveFloors(g, gs),
			minMed(g.values(func(r Run) *float64 { return r.RedisCPUus }), 2),
			minMed(g.values(func(r Run) *float64 { return r.ScriptUsec }), 2),
			minMed(g.values(func(r Run) *float64 { return r.OtherUsec }), 2),
			minMed(g.values(decisionsPerScript), 1), errs)
	}
	fmt.Fprintln(w)
	writeCompact(w, gs)
}

// writeCompact writes the medians side by side: one column per contender, a few rows per
// scenario (the shape of issue 26's table).
func writeCompact(w io.Writer, gs []*group) {
	var contenders, scenarios []string
	for _, g := range gs {
		if !slices.Contains(contenders, g.contender) {
			contenders = append(contenders, g.contender)
		}
		if !slices.Contains(scenarios, g.scenario) {
			scenarios = append(scenarios, g.scenario)
		}
	}
	find := func(scenario, contender string) *group {
		i := slices.IndexFunc(gs, func(g *group) bool { return g.scenario == scenario && g.contender == contender })
		if i < 0 {
			return nil
		}
		return gs[i]
	}
	median := func(g *group, f func(Run) *float64, prec int) string {
		if g == nil {
			return "—"
		}
		_, med, ok := minMedian(g.values(f))
		if !ok {
			return "—"
		}
		return strconv.FormatFloat(med, 'f', prec, 64)
	}
	fmt.Fprintln(w, "Side by side, medians over the rounds:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | measure | "+strings.Join(contenders, " | ")+" |")
	fmt.Fprintln(w, "|---|---|"+strings.Repeat("---:|", len(contenders)))
	rows := []struct {
		name string
		cell func(*group) string
	}{
		{"requests/s", func(g *group) string {
			if g == nil {
				return "—"
			}
			_, med, _ := minMedian(g.values(func(r Run) *float64 { return ptr(r.PerSecond) }))
			return thousands(med)
		}},
		{"server CPU µs/req", func(g *group) string { return median(g, func(r Run) *float64 { return r.ServerCPUus }, 1) }},
		{"above the floor µs/req", func(g *group) string {
			if g == nil {
				return "—"
			}
			a, _, _ := strings.Cut(aboveFloor(g, gs, floorName), " ")
			return a
		}},
		{"above " + redisFloorName + " µs/req (x it)", func(g *group) string {
			if g == nil {
				return "—"
			}
			return aboveFloor(g, gs, redisFloorName)
		}},
		{"Redis CPU µs/req", func(g *group) string { return median(g, func(r Run) *float64 { return r.RedisCPUus }, 2) }},
		{"decisions / script call", func(g *group) string { return median(g, decisionsPerScript, 1) }},
	}
	if !slices.ContainsFunc(gs, func(f *group) bool { return f.contender == redisFloorName }) {
		rows = slices.DeleteFunc(rows, func(r struct {
			name string
			cell func(*group) string
		}) bool {
			return strings.Contains(r.name, redisFloorName)
		})
	}
	for _, s := range scenarios {
		for _, row := range rows {
			cells := make([]string, len(contenders))
			for i, c := range contenders {
				cells[i] = row.cell(find(s, c))
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", s, row.name, strings.Join(cells, " | "))
		}
	}
}

// aboveFloors is aboveFloor of the floor, and of the Redis floor after it when it ran.
func aboveFloors(g *group, gs []*group) string {
	a := aboveFloor(g, gs, floorName)
	if slices.ContainsFunc(gs, func(f *group) bool { return f.contender == redisFloorName }) {
		a += "; " + aboveFloor(g, gs, redisFloorName) + " " + redisFloorName
	}
	return a
}

// aboveFloor is g's median server CPU less the floor contender's in g's scenario, and the
// ratio of the two; "—" for the floor itself or without one.
func aboveFloor(g *group, gs []*group, floor string) string {
	if g.contender == floor {
		return "—"
	}
	i := slices.IndexFunc(gs, func(f *group) bool { return f.scenario == g.scenario && f.contender == floor })
	if i < 0 {
		return "—"
	}
	_, fmed, ok1 := minMedian(gs[i].values(func(r Run) *float64 { return r.ServerCPUus }))
	_, med, ok2 := minMedian(g.values(func(r Run) *float64 { return r.ServerCPUus }))
	if !ok1 || !ok2 || fmed == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f (%.2fx the floor)", med-fmed, (med-fmed)/fmed)
}

func minMed(vs []float64, prec int) string {
	lo, med, ok := minMedian(vs)
	if !ok {
		return "—"
	}
	return strconv.FormatFloat(lo, 'f', prec, 64) + " / " + strconv.FormatFloat(med, 'f', prec, 64)
}

// num formats v with prec decimals, "—" when not measured.
func num(v *float64, prec int) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', prec, 64)
}

// pct is part as a percentage of whole, one decimal.
func pct(part, whole int64) string {
	if whole == 0 {
		return "0.0"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64)
}

// thousands formats v rounded, with a comma every three digits (12,345).
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
