package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// TestInFlightFixtures loads each file of testdata/inflight: one problem per file, named with
// its file, line and field path.
func TestInFlightFixtures(t *testing.T) {
	want := map[string][]string{
		"zero_limit.yaml":                   {"zero_limit.yaml:4: descriptors[0].max_in_flight.limit: must be between 1 and"},
		"short_lease.yaml":                  {"short_lease.yaml:4: descriptors[0].max_in_flight.lease: must be between 10ms and 24h0m0s", "got 5ms"},
		"bad_lease.yaml":                    {"bad_lease.yaml:4: descriptors[0].max_in_flight.lease: not a duration", `"soon"`},
		"unknown_field.yaml":                {"unknown_field.yaml:4: descriptors[0].max_in_flight: unknown field \"leese\""},
		"not_a_number.yaml":                 {"not_a_number.yaml:4: descriptors[0].max_in_flight: want a number of requests or a mapping", `"many"`},
		"limit_and_adaptive.yaml":           {"limit_and_adaptive.yaml:5: descriptors[0].max_in_flight.limit: exclusive with adaptive"},
		"adaptive_ceiling_below_floor.yaml": {"adaptive_ceiling_below_floor.yaml:6: descriptors[0].max_in_flight.adaptive.ceiling: must be at least floor (20), got 10"},
		"adaptive_bad_smoothing.yaml":       {"adaptive_bad_smoothing.yaml:5: descriptors[0].max_in_flight.adaptive.smoothing: must be in (0, 1], got 2"},
		"adaptive_unknown_field.yaml":       {"adaptive_unknown_field.yaml:5: descriptors[0].max_in_flight.adaptive: unknown field \"ceilng\""},
		"with_unlimited.yaml":               {"with_unlimited.yaml:5: descriptors[0].max_in_flight: cannot be combined with an unlimited rate limit"},
		"zero_lease.yaml":                   {`zero_lease.yaml:4: descriptors[0].max_in_flight.lease: must be between 10ms and 10m0s, got "0" (leave lease out for the default 10s)`},
		"long_lease.yaml":                   {"long_lease.yaml:4: descriptors[0].max_in_flight.lease: lease 24h0m0s is longer than the 10m0s a rule may ask for"},
	}
	for base, err := range loadFixtures(t, "testdata/inflight", want) {
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: error does not wrap ErrInvalid: %v", base, err)
		}
		if n := strings.Count(err.Error(), base+":"); n != 1 {
			t.Errorf("%s: %d problems, want 1: %v", base, n, err)
		}
	}
}

const inFlightRules = `
domain: d
descriptors:
  - key: route
    value: /export
    rate_limit: {unit: minute, requests_per_unit: 100}
    max_in_flight: {limit: 10, lease: 30s}
  - key: route
    value: /report
    max_in_flight: 3
  - key: route
    value: /llm
    max_in_flight:
      adaptive: {floor: 2, ceiling: 40, initial: 8}
`

func compileWith(t *testing.T, o config.Options, rules string) (*config.Config, error) {
	t.Helper()
	doc, err := config.Decode("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	return config.CompileWith(o, doc)
}

func TestMaxInFlight(t *testing.T) {
	c, err := compileWith(t, config.Options{}, inFlightRules)
	if err != nil {
		t.Fatal(err)
	}
	dom := c.Domain("d")
	export := config.Lookup(dom, []entry{{"route", "/export"}})
	if export == nil || len(export.Rules) != 1 || export.InFlight == nil || export.InFlight.Limit != 10 || export.InFlight.Lease != 30*time.Second {
		t.Fatalf("/export: %+v", export)
	}
	// a descriptor with max_in_flight alone is a limit with no rate rules
	report := config.Lookup(dom, []entry{{"route", "/report"}})
	if report == nil || len(report.Rules) != 0 || report.Unlimited || report.InFlight == nil || report.InFlight.Limit != 3 || report.InFlight.Adaptive != nil || report.InFlight.Lease != 0 {
		t.Fatalf("/report: %+v", report)
	}
	// an adaptive limit is its settings, plain data (the engine keeps the limit that learns:
	// rls's TestAdaptiveInFlightState)
	llm := config.Lookup(dom, []entry{{"route", "/llm"}})
	if llm == nil || llm.InFlight == nil || llm.InFlight.Adaptive == nil || llm.InFlight.Limit != 40 || llm.InFlight.Adaptive.Initial != 8 ||
		llm.InFlight.Adaptive.Floor != 2 || llm.InFlight.Adaptive.Ceiling != 40 {
		t.Fatalf("/llm: %+v", llm)
	}
}

// sluice serve compiles with RefuseInFlight: a max_in_flight is refused, saying why, at
// every descriptor that has one.
func TestRefuseInFlight(t *testing.T) {
	_, err := compileWith(t, config.Options{RefuseInFlight: true}, inFlightRules)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{"rules.yaml:7: descriptors[0].max_in_flight: not enforced here: the RLS protocol has no request-finished signal",
		"rules.yaml:10: descriptors[1].max_in_flight:", "rules.yaml:14: descriptors[2].max_in_flight:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}

// The YAML of docs/CONCURRENCY.md compiles, with the limits it describes.
func TestConcurrencyDocYAML(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONCURRENCY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block in docs/CONCURRENCY.md")
	}
	c, err := compileWith(t, config.Options{}, block)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domain("edge")
	export := config.Lookup(d, []entry{{"generic_key", "export"}})
	llm := config.Lookup(d, []entry{{"generic_key", "llm"}})
	if export == nil || export.InFlight == nil || export.InFlight.Limit != 4 || export.InFlight.Lease != 30*time.Second || len(export.Rules) != 1 ||
		llm == nil || llm.InFlight == nil || llm.InFlight.Adaptive == nil || llm.InFlight.Limit != 64 {
		t.Errorf("export %+v, llm %+v", export, llm)
	}
}

// TestLeaseBound (issue 31 item 9): a rule may ask for a lease up to Options.MaxLease
// (DefaultMaxLease, 10 minutes, when 0), what an operator can wait out when a holder is
// killed; every lease from 0 to past sluice.MaxLease is accepted exactly when it lies in
// [sluice.MinLease, bound], and a written 0 (or 0s) is refused, not read as the default.
func TestLeaseBound(t *testing.T) {
	leases := []string{"0", "0s", "1ms", "10ms", "10s", "9m59s", "10m", "10m1ms", "1h", "24h", "25h"}
	for _, bound := range []time.Duration{0, time.Minute, 2 * time.Hour, 48 * time.Hour} {
		effective := bound
		switch {
		case bound == 0:
			effective = config.DefaultMaxLease
		case bound > sluice.MaxLease:
			effective = sluice.MaxLease
		}
		for _, lease := range leases {
			d, _ := time.ParseDuration(lease)
			_, err := compileWith(t, config.Options{MaxLease: bound}, "domain: d\ndescriptors:\n  - key: a\n    max_in_flight: {limit: 5, lease: "+lease+"}\n")
			want := d >= sluice.MinLease && d <= effective
			if (err == nil) != want {
				t.Errorf("bound %v, lease %s: %v; want accepted %v", bound, lease, err, want)
			}
			if err != nil && !strings.Contains(err.Error(), "descriptors[0].max_in_flight.lease: ") {
				t.Errorf("bound %v, lease %s: %v does not name the field", bound, lease, err)
			}
		}
	}
	// The default lease (10 s) under a bound shorter than it is named as such.
	_, err := compileWith(t, config.Options{MaxLease: time.Second}, "domain: d\ndescriptors:\n  - key: a\n    max_in_flight: 5\n")
	if err == nil || !strings.Contains(err.Error(), "descriptors[0].max_in_flight: the default lease 10s is longer than the 1s") {
		t.Errorf("default lease over a 1 s bound: %v", err)
	}
}
