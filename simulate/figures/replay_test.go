package figures

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/replay"
)

// TestWriteReplay: the figures of a replay of the README's example log, one panel per rule.
func TestWriteReplay(t *testing.T) {
	rules, err := config.Load("../../examples/replay/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	format, err := replay.ParseFormat("combined", "")
	if err != nil {
		t.Fatal(err)
	}
	in, err := replay.FileInput("../../examples/replay/access.log.gz")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Run(context.Background(), replay.Config{Rules: rules, Format: format}, in)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteReplay(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"access_denials.png", "access_denials.svg", "access_rates.png", "access_rates.svg"}
	if len(paths) != len(want) {
		t.Fatalf("wrote %v, want %v", paths, want)
	}
	for i, p := range paths {
		if filepath.Base(p) != want[i] {
			t.Errorf("wrote %s, want %s", p, want[i])
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %v", p, err)
		}
		if filepath.Ext(p) == ".png" {
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil || img.Bounds().Dx() < 400 {
				t.Errorf("%s: %v", p, err)
			}
		}
	}
}
