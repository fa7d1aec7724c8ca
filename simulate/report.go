package simulate

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// Formats lists the table formats WriteTable accepts.
var Formats = []string{"text", "csv", "json"}

// WriteTable writes the rows as a table in format "text" (aligned columns, 4 significant
// digits), "csv" (a header of Columns, full precision) or "json" (an array of objects keyed by
// Columns). Metrics that do not apply are "-" in text and CSV and null in JSON.
func WriteTable(w io.Writer, rows []Row, format string) error {
	switch format {
	case "text":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for i, c := range Columns {
			sep := "\t"
			if i == len(Columns)-1 {
				sep = "\n"
			}
			fmt.Fprint(tw, c, sep)
		}
		for _, r := range rows {
			cells := r.cells(4)
			for i, c := range cells {
				sep := "\t"
				if i == len(cells)-1 {
					sep = "\n"
				}
				fmt.Fprint(tw, c, sep)
			}
		}
		return tw.Flush()
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(Columns); err != nil {
			return err
		}
		for _, r := range rows {
			if err := cw.Write(r.cells(-1)); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case "json":
		// Objects are written by hand to keep the keys in Columns order.
		var b bytes.Buffer
		b.WriteString("[")
		for i, r := range rows {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n  {")
			for j, v := range r.values() {
				if f, ok := v.(float64); ok && math.IsNaN(f) {
					v = nil
				}
				val, err := json.Marshal(v)
				if err != nil {
					return err
				}
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q: %s", Columns[j], val)
			}
			b.WriteString("}")
		}
		b.WriteString("\n]\n")
		_, err := w.Write(b.Bytes())
		return err
	}
	return fmt.Errorf("simulate: format: unknown %q (want text, csv or json)", format)
}

// values returns the row's cells in Columns order.
func (r Row) values() []any {
	return []any{r.Scenario, r.Algorithm, r.Mode, r.Nodes, r.Routing, r.Requests,
		r.AdmittedFraction, r.OverAdmission, r.LimitViolations, r.NeedlessDenials,
		r.MeanAbsError, r.Errors, r.RateEstimationWrong, r.RateEstimationError,
		r.OverAdmissionOutage, r.OverAdmissionRecovery, r.FairnessError}
}

// cells formats the row's values, floats with prec significant digits (-1: exact).
func (r Row) cells(prec int) []string {
	vals := r.values()
	out := make([]string, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) {
				out[i] = "-"
			} else {
				out[i] = strconv.FormatFloat(x, 'g', prec, 64)
			}
		default:
			out[i] = fmt.Sprint(x)
		}
	}
	return out
}
