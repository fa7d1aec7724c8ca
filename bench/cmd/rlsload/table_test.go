package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMinMedian(t *testing.T) {
	for _, tc := range []struct {
		in      []float64
		lo, med float64
		ok      bool
	}{
		{nil, 0, 0, false},
		{[]float64{5}, 5, 5, true},
		{[]float64{9, 1, 5}, 1, 5, true},
		{[]float64{4, 1, 3, 2}, 1, 2.5, true},
	} {
		lo, med, ok := minMedian(tc.in)
		if lo != tc.lo || med != tc.med || ok != tc.ok {
			t.Errorf("%v: got %v %v %v, want %v %v %v", tc.in, lo, med, ok, tc.lo, tc.med, tc.ok)
		}
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999.4: "999", 999.6: "1,000", 12345: "12,345", 1234567: "1,234,567"} {
		if got := thousands(in); got != want {
			t.Errorf("%v: %q, want %q", in, got, want)
		}
	}
}

// TestTableSummary: per contender and scenario, min and median over the rounds, and the
// server CPU above the floor of the same scenario.
func TestTableSummary(t *testing.T) {
	var runs []Run
	add := func(scenario, contender string, cpu float64, redis *float64, scripts *float64) {
		runs = append(runs, Run{Scenario: scenario, Contender: contender, Round: 1, Requests: 1000, PerSecond: 1000,
			ServerCPUus: ptr(cpu), RedisCPUus: redis, ScriptCalls: scripts})
	}
	for _, cpu := range []float64{70, 60, 80} {
		add("users", "sluice", cpu, ptr(20), ptr(0.25))
	}
	for _, cpu := range []float64{50, 40} {
		add("users", floorName, cpu, nil, nil)
	}
	add("single", "sluice", 300, ptr(50), ptr(1))
	var sb strings.Builder
	writeTables(&sb, runs)
	out := sb.String()
	for _, want := range []string{
		"| users | sluice | 3 | 1,000 (1,000–1,000) | 60.0 / 70.0 | 25.0 (0.56x the floor) | 20.00 / 20.00 | — | — | 4.0 / 4.0 | 0 |",
		"| users | floor | 2 | 1,000 (1,000–1,000) | 40.0 / 45.0 | — |",
		"| single | sluice | 1 | 1,000 (1,000–1,000) | 300.0 / 300.0 | — |",
		"| scenario | measure | sluice | floor |",
		"| users | server CPU µs/req | 70.0 | 45.0 |",
		"| users | above the floor µs/req | 25.0 | — |",
		"| users | decisions / script call | 4.0 | — |",
		"| single | Redis CPU µs/req | 50.00 | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no row %q in:\n%s", want, out)
		}
	}
}

func TestTableCmdErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"contender\":\"x\"}\nnot json\n"), 0o644)
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	for args, want := range map[string]string{
		"":                         "name at least one results file",
		bad:                        "bad.jsonl line 2",
		empty:                      "no runs",
		filepath.Join(dir, "none"): "no such file",
	} {
		var a []string
		if args != "" {
			a = []string{args}
		}
		err := tableCmd(a, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", args, err, want)
		}
	}
}
