package figures

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/simulate"
)

func runSteady(t *testing.T, modes []simulate.Mode, variants []simulate.Variant) *simulate.Result {
	t.Helper()
	sc, err := simulate.ScenarioByName("steady")
	if err != nil {
		t.Fatal(err)
	}
	res, err := simulate.Run(context.Background(), simulate.Config{Scenario: sc, Seed: 1, Duration: 10 * time.Minute, Modes: modes, Variants: variants})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	res := runSteady(t, []simulate.Mode{simulate.Single(), simulate.Sync(2, simulate.RoundRobin)}, nil)
	paths, err := Write(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 6 {
		t.Fatalf("wrote %v, want 3 figures x 2 formats", paths)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(p) {
		case ".png":
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil || img.Bounds().Dx() < 100 {
				t.Errorf("%s: not a usable PNG (%v)", p, err)
			}
		case ".svg":
			if !strings.Contains(string(b), "<svg") || len(b) < 1000 {
				t.Errorf("%s: not an SVG", p)
			}
		}
	}
}

// TestWriteQuotaShares: a quota mode's result gets the shares figure.
func TestWriteQuotaShares(t *testing.T) {
	modes, err := simulate.ParseModes("quota_1s", 4, []simulate.Routing{simulate.Skewed})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := simulate.ParseVariants("token_bucket")
	if err != nil {
		t.Fatal(err)
	}
	paths, err := Write(t.TempDir(), runSteady(t, modes, vs))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range paths {
		found = found || strings.HasSuffix(p, "steady_quota_shares.png")
	}
	if !found {
		t.Errorf("no shares figure in %v", paths)
	}
}

// TestWriteRegions draws the regions scenario's figure as PNG and SVG.
func TestWriteRegions(t *testing.T) {
	res, err := simulate.RunRegions(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := WriteRegions(t.TempDir(), res)
	if err != nil || len(paths) != 2 {
		t.Fatalf("wrote %v: %v", paths, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatalf("%s: %v", paths[0], err)
	}
}

// TestWriteBudget: the llm_budget scenario's figure is drawn as PNG and SVG.
func TestWriteBudget(t *testing.T) {
	rows, err := simulate.RunLLMBudget(context.Background(), simulate.LLMBudgetPolicies, []int{1, 10}, 1)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := WriteBudget(t.TempDir(), rows)
	if err != nil || len(paths) != 2 {
		t.Fatalf("wrote %v, %v", paths, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if img, err := png.Decode(bytes.NewReader(b)); err != nil || img.Bounds().Dx() < 100 {
		t.Fatalf("not a usable PNG (%v)", err)
	}
}
