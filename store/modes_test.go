package store_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// modesTable reads docs/MODES.md's table of stores and modes: by scheme, the cell of each
// mode and of the fallbacks.
func modesTable(t *testing.T) map[string]map[string]string {
	t.Helper()
	data, err := os.ReadFile("../docs/MODES.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "## Stores and modes\n")
	if !ok {
		t.Fatal(`docs/MODES.md: no "## Stores and modes"`)
	}
	table := map[string]map[string]string{}
	var header []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if header != nil {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
			continue
		case strings.HasPrefix(cells[0], "---"):
			continue
		}
		for _, scheme := range strings.Split(cells[0], ",") {
			row := map[string]string{}
			for i, h := range header[1:] {
				row[strings.Fields(h)[0]] = cells[i+1]
			}
			table[strings.Trim(strings.TrimSpace(scheme), "`")] = row
		}
	}
	return table
}

// TestModesTable: every cell of docs/MODES.md's table of stores and modes is what the code
// does: a "yes" opens (the stores at closed ports: Open does not dial without Ping), a "no"
// is refused by Validate, CheckModeOn and Open with the cell's words; every scheme has a row.
func TestModesTable(t *testing.T) {
	urls := map[string]string{
		"memory": "memory", "redis": "redis://127.0.0.1:1/0", "rediss": "rediss://127.0.0.1:1/0",
		"redis-cluster": "redis-cluster://127.0.0.1:1,127.0.0.1:2", "redis-sentinel": "redis-sentinel://127.0.0.1:1/m",
		"memcached": "memcached://127.0.0.1:1",
	}
	table := modesTable(t)
	if len(table) != len(urls) {
		t.Errorf("table rows %v, want one per scheme of %v", table, urls)
	}
	for scheme, url := range urls {
		row := table[scheme]
		if row == nil {
			t.Errorf("%s: no row", scheme)
			continue
		}
		for _, mode := range []string{"sync", "overlimit", "async"} {
			cell := row[mode]
			supported := strings.HasPrefix(cell, "yes")
			if !supported && !strings.HasPrefix(cell, "no: ") {
				t.Errorf("%s %s: cell %q is neither yes nor no: WHY", scheme, mode, cell)
				continue
			}
			for _, fallback := range []string{"", "local", "fail_open", "fail_closed"} {
				c := store.Config{Backend: store.Backend{URL: url}, Decorators: store.Decorators{Mode: mode, Fallback: fallback}}
				check, validate := store.CheckModeOn(url, mode), c.Validate()
				if supported {
					if check != nil || validate != nil {
						t.Errorf("%s %s %q: the table says yes, the code %v / %v", scheme, mode, fallback, check, validate)
					}
					_, closer, err := store.Open(context.Background(), c)
					if err != nil {
						t.Errorf("%s %s %q: the table says yes, Open: %v", scheme, mode, fallback, err)
					} else {
						closer.Close()
					}
					if fallback != "" && !strings.HasPrefix(row["fallback"], "yes") {
						t.Errorf("%s: fallback cell %q, but %s with %s opens", scheme, row["fallback"], mode, fallback)
					}
					continue
				}
				why := strings.TrimPrefix(cell, "no: ")
				_, _, err := store.Open(context.Background(), c)
				for name, e := range map[string]error{"CheckModeOn": check, "Validate": validate, "Open": err} {
					if e == nil || !strings.Contains(e.Error(), why) {
						t.Errorf("%s %s %q: %s: %v, want the table's words %q", scheme, mode, fallback, name, e, why)
					}
				}
			}
		}
	}
}
