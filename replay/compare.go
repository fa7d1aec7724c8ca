package replay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
)

// CompareReport is what a change of rules changes: the requests the two sets decide
// differently, by client, the clients with the most changed requests first.
type CompareReport struct {
	// A and B are the replays of the log through each set of rules.
	A, B *Report `json:"-"`
	// NameA and NameB name the two sets.
	NameA string `json:"a"`
	NameB string `json:"b"`
	// By is what a client is: "client" (its address, as remote_address keys it) or
	// "header:NAME".
	By string `json:"by"`
	// Requests were decided under both; DeniedA and DeniedB under each; NewlyDenied are
	// denied under B but not A, NewlyAllowed the other way.
	Requests     int64 `json:"requests"`
	DeniedA      int64 `json:"denied_a"`
	DeniedB      int64 `json:"denied_b"`
	NewlyDenied  int64 `json:"newly_denied"`
	NewlyAllowed int64 `json:"newly_allowed"`
	// ClientsChanged have at least one request decided differently; Clients are the Top of
	// them with the most, most first.
	ClientsChanged int64           `json:"clients_changed"`
	Clients        []ChangedClient `json:"clients"`
	// DroppedClients were dropped past Config.MaxClients (counted in the totals; their
	// changes counted again as a new client's if they came back).
	DroppedClients int64 `json:"dropped_clients"`
}

// ChangedClient is one client whose requests the two sets decide differently.
type ChangedClient struct {
	// Client is the client's address or header value, hashed unless a limit of the rules
	// that met it shows it raw (telemetry: raw).
	Client       string `json:"client"`
	Requests     int64  `json:"requests"`
	DeniedA      int64  `json:"denied_a"`
	DeniedB      int64  `json:"denied_b"`
	NewlyDenied  int64  `json:"newly_denied"`
	NewlyAllowed int64  `json:"newly_allowed"`
	raw          bool
}

func (c *ChangedClient) changes() int64 { return c.NewlyDenied + c.NewlyAllowed }

// Compare replays the log through cfg.Rules (A) and other (B) side by side, each on a store
// of its own, and reports the clients whose requests they decide differently: by is
// "client" (the default, "") or "header:NAME". nameA and nameB name the sets in the report.
func Compare(ctx context.Context, cfg Config, other *config.Config, by, nameA, nameB string, in Input) (*CompareReport, error) {
	if by == "" {
		by = "client"
	}
	header, isHeader := strings.CutPrefix(by, "header:")
	if by != "client" && (!isHeader || header == "") {
		return nil, fmt.Errorf("replay: by: want client or header:NAME, got %q", by)
	}
	if !isHeader {
		header = ""
	}
	cfg, _, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &comparer{header: header, maxClients: cfg.MaxClients, byKey: map[string]*ChangedClient{},
		kept: newTopSet(cfg.Top, func(c *ChangedClient) string { return c.Client }, func(a, b *ChangedClient) bool {
			if a.changes() != b.changes() {
				return a.changes() < b.changes()
			}
			if a.Requests != b.Requests {
				return a.Requests < b.Requests
			}
			return a.Client > b.Client
		}, func(into *ChangedClient, from ChangedClient) {
			into.Requests, into.DeniedA, into.DeniedB = into.Requests+from.Requests, into.DeniedA+from.DeniedA, into.DeniedB+from.DeniedB
			into.NewlyDenied, into.NewlyAllowed, into.raw = into.NewlyDenied+from.NewlyDenied, into.NewlyAllowed+from.NewlyAllowed, into.raw || from.raw
		})}
	reps, err := runAll(ctx, cfg, in, []*config.Config{cfg.Rules, other}, c)
	if err != nil {
		return nil, err
	}
	out := &CompareReport{A: reps[0], B: reps[1], NameA: nameA, NameB: nameB, By: by, Requests: reps[0].Requests,
		DeniedA: reps[0].Denied + reps[0].Invalid, DeniedB: reps[1].Denied + reps[1].Invalid,
		NewlyDenied: c.newlyDenied, NewlyAllowed: c.newlyAllowed, DroppedClients: c.dropped}
	out.ClientsChanged = c.droppedChanged
	for _, cl := range c.byKey {
		if cl.changes() > 0 {
			out.ClientsChanged++
			c.kept.offer(*cl) // a dropped client seen again merges with its first visit
		}
	}
	changed := c.kept.sorted()
	for _, cl := range changed {
		shown := cl
		if !cl.raw {
			shown.Client = rls.RedactValue(cl.Client)
		}
		out.Clients = append(out.Clients, shown)
	}
	return out, nil
}

// comparer counts the outcomes of each client under the two sets of rules, in bounded
// memory: past maxClients, a client without changes is dropped (else the one with the
// fewest of a few looked at, kept aside when it is among the top).
type comparer struct {
	header                    string
	maxClients                int
	byKey                     map[string]*ChangedClient
	kept                      *topSet[ChangedClient] // the clients with the most changes, dropped ones among them
	newlyDenied, newlyAllowed int64
	dropped, droppedChanged   int64
}

func (c *comparer) group(q *request) string {
	if c.header == "" {
		if k := q.clientKey(); k != "" {
			return k
		}
		return "unknown"
	}
	if v, ok := q.Header(c.header); ok {
		return v
	}
	return "none"
}

func (c *comparer) each(group string, denied []bool, raw bool) {
	cl := c.byKey[group]
	if cl == nil {
		if len(c.byKey) >= c.maxClients {
			c.drop()
		}
		cl = &ChangedClient{Client: group}
		c.byKey[group] = cl
	}
	cl.raw = cl.raw || raw
	cl.Requests++
	a, b := denied[0], denied[1]
	if a {
		cl.DeniedA++
	}
	if b {
		cl.DeniedB++
	}
	switch {
	case b && !a:
		cl.NewlyDenied++
		c.newlyDenied++
	case a && !b:
		cl.NewlyAllowed++
		c.newlyAllowed++
	}
}

// drop drops one client: one without changes among the first 64 the map yields, else the
// one of them with the fewest.
func (c *comparer) drop() {
	var victim *ChangedClient
	n := 0
	for _, cl := range c.byKey {
		if victim == nil || cl.changes() < victim.changes() {
			victim = cl
		}
		if n++; victim.changes() == 0 || n == 64 {
			break
		}
	}
	delete(c.byKey, victim.Client)
	c.dropped++
	if victim.changes() == 0 {
		return
	}
	c.droppedChanged++
	c.kept.offer(*victim)
}

// WriteCompare writes the comparison in format "text", "csv" or "json".
func WriteCompare(w io.Writer, rep *CompareReport, format string) error {
	header := []string{"client", "requests", "denied_a", "denied_b", "newly_denied", "newly_allowed"}
	rows := func() [][]string {
		out := make([][]string, 0, len(rep.Clients))
		for _, c := range rep.Clients {
			out = append(out, []string{c.Client, itoa(c.Requests), itoa(c.DeniedA), itoa(c.DeniedB), itoa(c.NewlyDenied), itoa(c.NewlyAllowed)})
		}
		return out
	}
	return writeAs(w, format, rep, header, rows, func(b *bytes.Buffer) {
		fmt.Fprintf(b, "a: %s: %d of %d requests denied\n", rep.NameA, rep.DeniedA, rep.Requests)
		fmt.Fprintf(b, "b: %s: %d of %d requests denied\n", rep.NameB, rep.DeniedB, rep.Requests)
		fmt.Fprintf(b, "%d requests decided differently (%d newly denied, %d newly allowed), %d clients (by %s)\n\n",
			rep.NewlyDenied+rep.NewlyAllowed, rep.NewlyDenied, rep.NewlyAllowed, rep.ClientsChanged, rep.By)
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range rows() {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		_ = tw.Flush()
	})
}
