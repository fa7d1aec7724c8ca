package replay

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// TestRulesWithActions: rules without a proxy section, given one on the command line,
// replay as the same rules with it; a wrong section is named as the rules' problems are.
func TestRulesWithActions(t *testing.T) {
	o := config.Options{DefaultAlgorithm: sluice.AlgorithmSlidingLog}
	if _, err := config.LoadWith("testdata/noproxy.yaml", o); err != nil {
		t.Fatal(err)
	}
	withActions, err := RulesWithActions("testdata/noproxy.yaml", "{rate_limits: [{actions: [{remote_address: {}}]}]}", o)
	if err != nil {
		t.Fatal(err)
	}
	evs := testTraffic()
	path := writeLog(t, t.TempDir(), testFormats[2], evs, false)
	format, _ := ParseFormat("combined", "")
	var denials []int64
	for _, rules := range []*config.Config{withActions, loadRules(t, sluice.AlgorithmSlidingLog)} {
		in, _ := FileInput(path)
		rep, err := Run(context.Background(), Config{Rules: rules, Format: format}, in)
		if err != nil {
			t.Fatal(err)
		}
		denials = append(denials, rep.Rules[0].Denials)
	}
	if denials[0] != denials[1] || denials[0] == 0 {
		t.Errorf("denials %v: want the same, not 0", denials)
	}
	in, _ := FileInput(path)
	if _, err := Run(context.Background(), Config{Rules: func() *config.Config { c, _ := config.LoadWith("testdata/noproxy.yaml", o); return c }(), Format: format}, in); err == nil ||
		!strings.Contains(err.Error(), "no document has a proxy section") {
		t.Errorf("rules without a proxy section: %v", err)
	}
	for actions, want := range map[string]string{
		"[1, 2]": "replay: actions: want the proxy section",
		"{rate_limits: [{actions: [{remote_adress: {}}]}]}": "proxy.rate_limits[0].actions[0]",
		"{rate_limits: []}": "proxy.rate_limits",
	} {
		_, err := RulesWithActions("testdata/noproxy.yaml", actions, o)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "sluice-replay-") {
			t.Errorf("%s: %v, want an error naming %s (and not the temporary file)", actions, err, want)
		}
	}
}
