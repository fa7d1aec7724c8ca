package replay

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
)

// Report is what a replay found: the log read, and what each rule would have done.
type Report struct {
	// Log and Format name the log and its format; Mode and Nodes how it was decided.
	Log    string `json:"log"`
	Format string `json:"format"`
	Mode   string `json:"mode"`
	Nodes  int    `json:"nodes"`
	// Lines were read, Requests decided; Malformed lines were skipped.
	Lines     int64     `json:"lines"`
	Requests  int64     `json:"requests"`
	Malformed Malformed `json:"malformed"`
	// OutOfOrder requests were logged earlier than one before them (a log written when
	// requests end): each was decided at the latest instant seen, at most MaxLag later
	// than logged.
	OutOfOrder int64         `json:"out_of_order"`
	MaxLag     time.Duration `json:"max_lag_ns"`
	// Start and End are the first and the last instants.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Denied requests were over a limit of the rules (sluice proxy would answer 429),
	// Invalid ones were refused (a descriptor the rules refuse: sluice proxy answers 400).
	Denied  int64 `json:"denied"`
	Invalid int64 `json:"invalid"`
	// Rules are the rules the requests met, in the order first met.
	Rules []RuleReport `json:"rules"`
}

// RuleReport is what one rule would have done: rule j of a configured limit.
type RuleReport struct {
	// Rule names the rule (its rate_limit's name, or the descriptor's full key), Domain its
	// domain, Limit its limit ("100/1m sliding_window"; "blocked" for requests_per_unit: 0).
	Rule   string `json:"rule"`
	Domain string `json:"domain"`
	Limit  string `json:"limit"`
	// LimitUnits per Period is the limit the exact reference holds the rule to.
	LimitUnits int64         `json:"limit_units"`
	Period     time.Duration `json:"period_ns"`
	// Shadow: the rule is in shadow mode (it denies nothing; Denials are would-be denials).
	Shadow bool `json:"shadow"`
	// Requests met the rule, asking for Units; Clients are the client keys seen (one dropped
	// past Config.MaxClients and seen again counts twice: see DroppedClients).
	Requests int64 `json:"requests"`
	Units    int64 `json:"units"`
	Clients  int64 `json:"clients"`
	// Denials are the requests the rule would deny; ExactDenials those of them the exact
	// reference (a sliding log of the units the rule admitted) denies too; the others are
	// NeedlessDenials. ExactViolations were admitted although the reference would deny them.
	Denials         int64 `json:"denials"`
	ExactDenials    int64 `json:"exact_denials"`
	NeedlessDenials int64 `json:"needless_denials"`
	ExactViolations int64 `json:"exact_violations"`
	// OverAdmission is the most units the rule admitted for one client in a trailing period,
	// divided by the limit (1 is exact; the documented bound of each algorithm in
	// docs/ALGORITHMS.md).
	OverAdmission float64 `json:"over_admission"`
	// FirstDenial is the instant of the first denial (nil: none); ClientsDenied the clients
	// denied at least once.
	FirstDenial   *time.Time `json:"first_denial"`
	ClientsDenied int64      `json:"clients_denied"`
	// Peak, P50, P90 and P99 are of the per-client rates: each client's most units asked
	// for in a trailing period (admitted or not), and their percentiles over the clients.
	Peak int64 `json:"peak"`
	P50  int64 `json:"p50"`
	P90  int64 `json:"p90"`
	P99  int64 `json:"p99"`
	// Top are the clients with the most denials, most first.
	Top []ClientReport `json:"top"`
	// Series counts the units requested and denied over time; Rates the clients by rate.
	Series []Point      `json:"series"`
	Rates  []RateBucket `json:"rates"`
	// DroppedClients were dropped past Config.MaxClients (their figures are in the rule's;
	// a key seen again counted as a new client); DroppedActive of them had asked within a
	// period, and their exact reference restarted if they came back.
	DroppedClients int64 `json:"dropped_clients"`
	DroppedActive  int64 `json:"dropped_active"`

	rates histogram
	limit *config.Limit
	j     int
}

// ClientReport is one client of a rule.
type ClientReport struct {
	// Client is the client's counter key without its domain ("key=value|key=value"), each
	// value hashed unless the rules show it raw (telemetry: raw, or a value the descriptor
	// names).
	Client       string     `json:"client"`
	Requests     int64      `json:"requests"`
	Denials      int64      `json:"denials"`
	ExactDenials int64      `json:"exact_denials"`
	FirstDenial  *time.Time `json:"first_denial"`
	Peak         int64      `json:"peak"`
}

// RateBucket counts the clients whose peak rate is at least Rate (and below the next
// bucket's).
type RateBucket struct {
	Rate    int64 `json:"rate"`
	Clients int64 `json:"clients"`
}

func instant(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// report sums the rule's figures up.
func (s *ruleStats) report() RuleReport {
	l := s.limit
	rates, top := s.clients.finish()
	r := RuleReport{Rule: s.name, Domain: l.Domain, LimitUnits: s.rule.Limit, Period: s.rule.Period,
		Shadow: l.ShadowMode, Requests: s.requests, Units: s.units, Clients: rates.total,
		Denials: s.denials, ExactDenials: s.agreed, NeedlessDenials: s.denials - s.agreed, ExactViolations: s.violations,
		FirstDenial: instant(s.firstDenial), ClientsDenied: s.clientsDenied,
		Peak: rates.max, P50: rates.quantile(0.50), P90: rates.quantile(0.90), P99: rates.quantile(0.99),
		Series: s.series.points(), DroppedClients: s.clients.dropped, DroppedActive: s.clients.droppedLive, rates: rates,
		limit: l, j: s.j}
	switch {
	case l.Block:
		r.Limit, r.Period = "blocked", time.Duration(s.clients.period)
	default:
		r.Limit = fmt.Sprintf("%d/%s %s", s.rule.Limit, shortDuration(s.rule.Period), s.rule.Algorithm)
		r.OverAdmission = float64(s.maxAdmitted) / float64(s.rule.Limit)
	}
	for b, n := range rates.counts {
		if n > 0 {
			r.Rates = append(r.Rates, RateBucket{Rate: lowest(b), Clients: n})
		}
	}
	for _, c := range top {
		_, shown, _ := strings.Cut(rls.RedactKey(c.key, l.RawValues), "|") // the domain is the rule's
		r.Top = append(r.Top, ClientReport{Client: shown, Requests: c.requests,
			Denials: c.denials, ExactDenials: c.agreed, FirstDenial: instant(c.firstDenial), Peak: c.peak})
	}
	return r
}

// shortDuration writes 1m for a minute and 1h for an hour (time.Duration writes 1m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, suffix := range []string{"m0s", "h0m"} {
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
			s = s[:len(s)-len(suffix)+1]
		}
	}
	return s
}

// Formats lists the table formats WriteTable accepts.
var Formats = []string{"text", "csv", "json"}

// Columns are the columns of the text and CSV tables: a row per rule (client "*"), then a
// row per top denied client of the rule.
var Columns = []string{"rule", "limit", "client", "requests", "denials", "exact_denials", "first_denial",
	"peak", "p50", "p90", "p99"}

// WriteTable writes the report in format "text" (a summary, then a block per rule), "csv"
// (the Columns) or "json" (the Report).
func WriteTable(w io.Writer, rep *Report, format string) error {
	return writeAs(w, format, rep, Columns, rep.rows, func(b *bytes.Buffer) {
		rep.writeSummary(b)
		for i := range rep.Rules {
			rep.Rules[i].writeText(b)
		}
	})
}

// writeAs writes v in format: "json" as indented JSON, "csv" as the header and the rows,
// "text" as text writes it.
func writeAs(w io.Writer, format string, v any, header []string, rows func() [][]string, text func(*bytes.Buffer)) error {
	var b bytes.Buffer
	switch format {
	case "json":
		j, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		b.Write(append(j, '\n'))
	case "csv":
		cw := csv.NewWriter(&b)
		_ = cw.Write(header)
		_ = cw.WriteAll(rows())
		if err := cw.Error(); err != nil {
			return err
		}
	case "text":
		text(&b)
	default:
		return fmt.Errorf("replay: format: unknown %q (want text, csv or json)", format)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeSummary writes what was read and decided, and the malformed lines.
func (rep *Report) writeSummary(w io.Writer) {
	span := "no request"
	if rep.Requests > 0 {
		span = fmt.Sprintf("%s to %s", rep.Start.Format(time.RFC3339), rep.End.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "%s (%s): %d lines, %d requests, %s; %d denied", rep.Log, rep.Format, rep.Lines, rep.Requests, span, rep.Denied)
	if rep.Nodes > 1 || rep.Mode != "sync" {
		fmt.Fprintf(w, " (mode %s, %d instances)", rep.Mode, rep.Nodes)
	}
	if rep.Invalid > 0 {
		fmt.Fprintf(w, ", %d refused (invalid descriptor)", rep.Invalid)
	}
	fmt.Fprintln(w)
	if rep.Malformed.Count > 0 {
		fmt.Fprintf(w, "%d malformed %s skipped:", rep.Malformed.Count, plural(rep.Malformed.Count, "line", "lines"))
		for i, l := range rep.Malformed.Lines {
			if i > 0 {
				fmt.Fprint(w, ";")
			}
			fmt.Fprintf(w, " line %d (%s)", l.Line, l.Reason)
		}
		if int64(len(rep.Malformed.Lines)) < rep.Malformed.Count {
			fmt.Fprint(w, " ...")
		}
		fmt.Fprintln(w)
	}
	if rep.OutOfOrder > 0 {
		fmt.Fprintf(w, "%d requests logged out of order (decided up to %v late)\n", rep.OutOfOrder, rep.MaxLag)
	}
	fmt.Fprintln(w)
}

// writeText writes the rule's figures, then a table of its top denied clients.
func (r *RuleReport) writeText(w io.Writer) {
	shadow := ""
	if r.Shadow {
		shadow = " (shadow mode: would-be denials)"
	}
	per := shortDuration(r.Period)
	fmt.Fprintf(w, "%s: %s%s\n", r.Rule, r.Limit, shadow)
	fmt.Fprintf(w, "  %d requests from %d clients; %d denied", r.Requests, r.Clients, r.Denials)
	if r.Denials > 0 {
		fmt.Fprintf(w, " (%d by the exact sliding log too), the first at %s; %d %s denied",
			r.ExactDenials, r.FirstDenial.Format(time.RFC3339), r.ClientsDenied, plural(r.ClientsDenied, "client", "clients"))
	}
	fmt.Fprintf(w, "\n  per-client peak requests per %s: p50 %d, p90 %d, p99 %d, max %d\n", per, r.P50, r.P90, r.P99, r.Peak)
	if r.DroppedClients > 0 {
		fmt.Fprintf(w, "  %d client summaries dropped past --max-clients (%d of them active): one seen again counted again\n",
			r.DroppedClients, r.DroppedActive)
	}
	if len(r.Top) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  client\trequests\tdenials\texact_denials\tfirst_denial\tpeak")
		for _, c := range r.Top {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%d\n", c.Client, c.Requests, c.Denials, c.ExactDenials, when(c.FirstDenial), c.Peak)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
}

// rows are the table's rows: each rule, then its top denied clients.
func (rep *Report) rows() [][]string {
	var rows [][]string
	for _, r := range rep.Rules {
		name := r.Rule
		if r.Shadow {
			name += " (shadow)"
		}
		rows = append(rows, []string{name, r.Limit, "*", itoa(r.Requests), itoa(r.Denials), itoa(r.ExactDenials),
			when(r.FirstDenial), itoa(r.Peak), itoa(r.P50), itoa(r.P90), itoa(r.P99)})
		for _, c := range r.Top {
			rows = append(rows, []string{name, r.Limit, c.Client, itoa(c.Requests), itoa(c.Denials), itoa(c.ExactDenials),
				when(c.FirstDenial), itoa(c.Peak), "", "", ""})
		}
	}
	return rows
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}
