package config_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluicehq/sluice/config"
)

// FuzzRules (issue 16, item 10): any bytes as a rules file decode and compile without a panic;
// a refusal wraps ErrInvalid and names the file.
func FuzzRules(f *testing.F) {
	for _, seed := range []string{
		"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10}\n",
		"domain: d\ndescriptors:\n  - key: k\n    value: 'a*b*'\n    descriptors:\n      - key: s\n        rate_limit: {unit: minute, requests_per_unit: 0}\n",
		"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {period: 1s, requests_per_unit: 5, algorithm: gcra, burst: 9, criticality: {sheddable: 0.5}}\n",
		"domain: d\nproxy:\n  rate_limits:\n    - actions: [{remote_address: {}}]\n",
		"domain: d\nquota_buckets: []\n",
		"domain: [\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Load validates what decoded even when decoding found problems (every problem in
		// one run): that must not panic either, and says the same.
		if _, err := config.LoadFS(fstest.MapFS{"fuzz.yaml": {Data: data}}, "fuzz.yaml"); err != nil &&
			(!errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "fuzz.yaml")) {
			t.Fatalf("Load: refusal does not wrap ErrInvalid or name the file: %v", err)
		}
		doc, err := config.Decode("fuzz.yaml", data)
		if err == nil {
			_, err = config.Compile(doc)
		}
		if err == nil {
			return
		}
		if !errors.Is(err, config.ErrInvalid) {
			t.Fatalf("refusal does not wrap ErrInvalid: %v", err)
		}
		if !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("refusal does not name the file: %v", err)
		}
	})
}
