package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// `sluice simulate --scenario latency_spike` prints the three in-flight limits side by side
// over the three phases, and --list names the scenario.
func TestSimulateLatencySpike(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "--scenario", "latency_spike", "--duration", "15s"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, row := range []string{"| rate_limit_only | before |", "| max_in_flight_40 | spike |", "| adaptive | after |"} {
		if !strings.Contains(stdout.String(), row) {
			t.Errorf("no row %q:\n%s", row, stdout.String())
		}
	}
	stdout.Reset()
	if code := run([]string{"simulate", "--list"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "\nlatency_spike: a backend slows down") {
		t.Errorf("--list omits latency_spike (exit %d):\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"simulate", "--scenario", "latency_spike", "--duration", "-1s"}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "duration") {
		t.Errorf("negative duration: exit %d: %s", code, stderr.String())
	}
}

// The table docs/CONCURRENCY.md shows is what `sluice simulate --scenario latency_spike`
// prints.
func TestSimulateLatencySpikeDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CONCURRENCY.md")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "--scenario", "latency_spike"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	head, table, _ := strings.Cut(stdout.String(), "\n\n")
	if !strings.Contains(head, "400 requests/s for 1m0s") {
		t.Errorf("heading: %q", head)
	}
	if !strings.Contains(string(doc), table) {
		t.Errorf("docs/CONCURRENCY.md does not show the table the command prints:\n%s", table)
	}
}
