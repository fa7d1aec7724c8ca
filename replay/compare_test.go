package replay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/config"
)

// outcomes decides the traffic with the sliding log's pure state machine at limit per
// minute: denied[i] for event i.
func outcomes(evs []event, limit int64) []bool {
	p := algorithm.Compile(sluice.Rule{Algorithm: sluice.AlgorithmSlidingLog, Limit: limit, Period: time.Minute})
	states := map[string]algorithm.State{}
	out := make([]bool, len(evs))
	for i, e := range evs {
		st := states[e.client]
		if st == nil {
			st = algorithm.New(sluice.AlgorithmSlidingLog)
			states[e.client] = st
		}
		out[i] = !st.Take(e.at.UnixNano(), &p, 1, 0).Allowed
	}
	return out
}

// TestCompareNamesTheChangedClients: --compare between 10 and 12 a minute names exactly the
// clients whose requests the two decide differently, each with its count, most first.
func TestCompareNamesTheChangedClients(t *testing.T) {
	evs := testTraffic()
	path := writeLog(t, t.TempDir(), testFormats[2], evs, false)
	format, _ := ParseFormat("combined", "")
	looser, err := config.LoadWith("testdata/looser.yaml", config.Options{DefaultAlgorithm: sluice.AlgorithmSlidingLog})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := FileInput(path)
	rep, err := Compare(context.Background(), Config{Rules: loadRules(t, sluice.AlgorithmSlidingLog), Format: format, Top: 100},
		looser, "", "rules.yaml", "looser.yaml", in)
	if err != nil {
		t.Fatal(err)
	}
	a, b := outcomes(evs, 10), outcomes(evs, 12)
	want := map[string][2]int64{} // newly denied, newly allowed
	var deniedA, deniedB int64
	for i, e := range evs {
		w := want[e.client]
		switch {
		case b[i] && !a[i]:
			w[0]++
		case a[i] && !b[i]:
			w[1]++
		}
		if w != [2]int64{} {
			want[e.client] = w
		}
		if a[i] {
			deniedA++
		}
		if b[i] {
			deniedB++
		}
	}
	if rep.DeniedA != deniedA || rep.DeniedB != deniedB || rep.Requests != int64(len(evs)) {
		t.Errorf("denied %d and %d of %d, want %d and %d of %d", rep.DeniedA, rep.DeniedB, rep.Requests, deniedA, deniedB, len(evs))
	}
	if int(rep.ClientsChanged) != len(want) || len(rep.Clients) != len(want) {
		t.Fatalf("%d clients changed (%d listed), want %d: %+v", rep.ClientsChanged, len(rep.Clients), len(want), rep.Clients)
	}
	for i, c := range rep.Clients {
		if w := want[c.Client]; w != [2]int64{c.NewlyDenied, c.NewlyAllowed} {
			t.Errorf("%s: newly denied %d, allowed %d; want %d, %d", c.Client, c.NewlyDenied, c.NewlyAllowed, w[0], w[1])
		}
		if i > 0 && c.changes() > rep.Clients[i-1].changes() {
			t.Errorf("not sorted by impact: %+v", rep.Clients)
		}
	}
	if rep.Clients[0].Client != scraper && rep.Clients[0].Client != burster {
		t.Errorf("most changed: %s", rep.Clients[0].Client)
	}
	for _, f := range Formats {
		var b strings.Builder
		if err := WriteCompare(&b, rep, f); err != nil || !strings.Contains(b.String(), burster) {
			t.Errorf("%s: %v\n%s", f, err, b.String())
		}
	}
}

// suggestTraffic is 10 minutes of 200 ordinary clients (one request every 8 to 60 s, so at
// most 8 a minute), 2 busier ones (15 a minute) and the scraper (120 a minute).
func suggestTraffic() []event {
	var evs []event
	end := testStart.Add(10 * time.Minute)
	add := func(addr string, every time.Duration, from time.Duration) {
		for t := testStart.Add(from); t.Before(end); t = t.Add(every) {
			evs = append(evs, event{at: t, client: addr, path: "/api/items"})
		}
	}
	for i := range 200 {
		add(fmtAddr(1, i), time.Duration(8+i%53)*time.Second, time.Duration(i%30)*time.Second)
	}
	add("10.2.0.1", 4*time.Second, 0)
	add("10.2.0.2", 4*time.Second, 2*time.Second)
	add(scraper, 500*time.Millisecond, 0)
	sortEvents(evs)
	return evs
}

// TestSuggestLimitsTheScraper: suggest writes rules check-config loads, whose limit (the
// p99 of the per-client rates x 1.5) limits the heavy-tail scraper and touches at most 1% of
// the other clients, with evidence that a replay of the suggested rules confirms.
func TestSuggestLimitsTheScraper(t *testing.T) {
	evs := suggestTraffic()
	dir := t.TempDir()
	logPath := writeLog(t, dir, testFormats[0], evs, false) // Envoy's format: millisecond instants
	rulesPath := filepath.Join(dir, "rules.yaml")
	src, _ := os.ReadFile("testdata/rules.yaml")
	if err := os.WriteFile(rulesPath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := config.Load(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	format, _ := ParseFormat("envoy", "")
	in, _ := FileInput(logPath)
	res, err := Suggest(context.Background(), Config{Rules: rules, Format: format, Top: 5}, SuggestConfig{}, rulesPath, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suggestions) != 1 {
		t.Fatalf("%d suggestions", len(res.Suggestions))
	}
	s := res.Suggestions[0]
	// 203 clients: the 201st peak (p99) is a busier client's 15; x 1.5 is 22.5, rounded up.
	if s.Clients != 203 || s.P99 != 15 || s.Peak != 120 || s.Suggested != 23 || s.Current != 10 {
		t.Errorf("suggestion %+v: want 203 clients, p99 15, peak 120, 23 (was 10)", s)
	}
	if s.ClientsDenied != 1 || len(s.Top) != 1 || s.Top[0].Client != "remote_address="+scraper || s.Denied == 0 {
		t.Errorf("the suggested limit denies %d clients (%+v), %d requests: want the scraper alone", s.ClientsDenied, s.Top, s.Denied)
	}
	out := filepath.Join(dir, "suggested.yaml")
	if err := os.WriteFile(out, res.Rules, 0o644); err != nil {
		t.Fatal(err)
	}
	suggested, err := config.Load(out) // what check-config does
	if err != nil {
		t.Fatalf("the suggested rules do not load: %v\n%s", err, res.Rules)
	}
	if got := suggested.Limits()[0].Rules[0].Limit; got != 23 {
		t.Errorf("suggested rules hold %d, want 23:\n%s", got, res.Rules)
	}
	for _, want := range []string{"# sluice suggest: edge.remote_address: 10/1m -> 23/1m, the p99 of the per-client peak rates (15) x 1.5.",
		"p50 ", "denies " + itoa(s.Denied) + " of " + itoa(int64(len(evs))) + " requests", "and 1 of 203 clients (0.5%)",
		"telemetry: raw", "proxy:"} {
		if !strings.Contains(string(res.Rules), want) {
			t.Errorf("suggested rules lack %q:\n%s", want, res.Rules)
		}
	}
	in, _ = FileInput(logPath)
	rep, err := Run(context.Background(), Config{Rules: suggested, Format: format}, in)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Rules[0]; r.Denials != s.Denied || r.ClientsDenied != 1 {
		t.Errorf("replayed, the suggested rules deny %d requests of %d clients; the evidence says %d of %d", r.Denials, r.ClientsDenied, s.Denied, s.ClientsDenied)
	}
}
