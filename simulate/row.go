package simulate

import "math"

// Row is the measured accuracy of one variant in one mode. Fractions are of all requests
// unless said otherwise; a metric that does not apply (the counting metrics of bucket
// algorithms) is NaN, printed as "-" in text and CSV and null in JSON.
type Row struct {
	Scenario  string `json:"scenario"`
	Algorithm string `json:"algorithm"`
	Mode      string `json:"mode"`
	Nodes     int    `json:"nodes"`
	Routing   string `json:"routing"`
	// Requests is the number of requests in the trace.
	Requests int64 `json:"requests"`
	// AdmittedFraction is the fraction of requests admitted.
	AdmittedFraction float64 `json:"admitted_fraction"`
	// OverAdmission is the most units the variant ever admitted for one key in a trailing
	// period, divided by the limit: 1 is exact, 2 is twice the limit.
	OverAdmission float64 `json:"over_admission"`
	// LimitViolations is the fraction of requests admitted although the limit had already
	// been reached in the trailing period (of the variant's own admitted requests).
	LimitViolations float64 `json:"limit_violations"`
	// NeedlessDenials is the fraction of requests denied although fewer than the limit had
	// been admitted in the trailing period.
	NeedlessDenials float64 `json:"needless_denials"`
	// MeanAbsError is, for counting algorithms, the mean over requests of |the variant's own
	// count - the exact count of its admitted units in the trailing period| / limit.
	MeanAbsError float64 `json:"mean_abs_error"`
	// Errors is the fraction of requests whose store call failed (counted as denied).
	Errors float64 `json:"errors"`
	// RateEstimationWrong is, for counting algorithms, the fraction of requests for which the
	// variant's estimate of the rate of all requests (admitted or not) and the exact rate fall
	// on different sides of the limit: Cloudflare's measure. It depends on the trace only, not
	// on the mode.
	RateEstimationWrong float64 `json:"rate_estimation_wrong"`
	// RateEstimationError is the mean |estimated rate - exact rate| / limit in the same view.
	RateEstimationError float64 `json:"rate_estimation_error"`
	// OverAdmissionOutage is OverAdmission over the instants of the store outage (modes with
	// one; NaN otherwise).
	OverAdmissionOutage float64 `json:"over_admission_outage"`
	// OverAdmissionRecovery is OverAdmission over the period after the store comes back: the
	// trailing periods that span the switch back (modes with an outage; NaN otherwise).
	OverAdmissionRecovery float64 `json:"over_admission_recovery"`
	// FairnessError is, in the quota mode, the mean over reporting rounds and keys of the
	// share of the limit assigned to the wrong instances: sum |share - max-min fair share| /
	// (2 x limit), the fair shares split from each instance's requests over the last period
	// (NaN in other modes).
	FairnessError float64 `json:"fairness_error"`
}

// Columns lists the table columns in order, as named in JSON.
var Columns = []string{"scenario", "algorithm", "mode", "nodes", "routing", "requests",
	"admitted_fraction", "over_admission", "limit_violations", "needless_denials",
	"mean_abs_error", "errors", "rate_estimation_wrong", "rate_estimation_error",
	"over_admission_outage", "over_admission_recovery", "fairness_error"}

var nan = math.NaN()
