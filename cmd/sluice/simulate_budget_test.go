package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSimulateLLMBudget: `sluice simulate --scenario llm_budget` prints the policies' table at
// every concurrency, and --list names the scenario.
func TestSimulateLLMBudget(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "--scenario", "llm_budget"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"| policy | concurrency |", "| charge_after | 1000 |", "| strict_metered | 1 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	stdout.Reset()
	if code := run([]string{"simulate", "--list"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "\nllm_budget: concurrent streamed LLM requests") {
		t.Errorf("--list: %d %s", code, stdout.String())
	}
}
