package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/simulate"
)

// writeBudgetPlots draws the llm_budget scenario's figure; nil without -tags plot.
var writeBudgetPlots func(dir string, rows []simulate.BudgetRow) ([]string, error)

// simulateLLMBudget runs `sluice simulate --scenario llm_budget`: concurrent streamed LLM
// requests against a token budget, charge-after vs bounded vs strict, as a table and, with
// --out (a -tags plot build), a figure.
func simulateLLMBudget(stdout, stderr io.Writer, seed uint64, out string) int {
	rows, err := simulate.RunLLMBudget(context.Background(), simulate.LLMBudgetPolicies, simulate.LLMBudgetConcurrency, seed)
	if err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "llm_budget: %s\n\n", simulate.LLMBudgetDefinition)
	if err := simulate.WriteBudgetTable(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	if out != "" {
		return wrote(stderr)(writeBudgetPlots(out, rows))
	}
	return 0
}
