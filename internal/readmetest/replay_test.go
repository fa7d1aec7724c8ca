package readmetest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestReadmeReplay follows the README's "Limits from your traffic" section on a built
// sluice: every command (`go run ./cmd/sluice replay ...`, `... suggest ...`) runs in the
// checkout and prints exactly the output shown under it (the `# ` lines, trailing spaces
// aside).
func TestReadmeReplay(t *testing.T) {
	lines := section(t, "README.md", "Limits from your traffic")
	bin := buildSluice(t)
	commands := 0
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "    go run ./cmd/sluice ")
		if !ok {
			continue
		}
		commands++
		var want []string
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    #") {
			i++
			want = append(want, strings.TrimPrefix(strings.TrimPrefix(lines[i], "    #"), " "))
		}
		if len(want) == 0 {
			t.Errorf("README: %s shows no output (# lines under it)", cmd)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		c := exec.CommandContext(ctx, bin, strings.Fields(cmd)...)
		c.Dir = root
		out, err := c.Output()
		cancel()
		if err != nil {
			t.Errorf("README: %s: %v", cmd, err)
			continue
		}
		var got []string
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			got = append(got, strings.TrimRight(l, " "))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("README: %s printed\n%s\nthe README shows\n%s", cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if commands != 3 {
		t.Errorf("followed %d commands, want replay, replay --compare and suggest: the section's shape changed", commands)
	}
}
