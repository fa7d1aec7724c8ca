package rpclimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// Door is an RPC transport's limits: its pipeline, the routes that find a call's limits, and
// its name ("grpclimit"), which starts its log lines and answers. It is safe for concurrent
// use.
type Door[K any] struct {
	Pipeline *pipeline.Pipeline
	Routes   *Routes[K]
	Name     string
}

// The kinds of the application's defects a door reports (pipeline.Defect).
const (
	defectCost = iota // a cost function that panicked or returned less than 1
	defectKey         // a key function that panicked
	numDefects
)

// Compile checks routes (each procedure well formed and given once: an error names
// "routes[i].FIELD", field being what the transport calls Route.Procedure) and builds the door
// of cfg.Name: the pipeline of every route's limits flattened ("routes[i].limits[j]"), each
// route a group, and the routes' index.
func Compile[K any](cfg pipeline.Config, field string, routes []Route[K]) (*Door[K], error) {
	seen := map[string]bool{}
	for i, r := range routes {
		path := "routes[" + strconv.Itoa(i) + "]." + field
		if err := checkProcedure(r.Procedure); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if seen[r.Procedure] {
			return nil, fmt.Errorf("%s: %q is given twice", path, r.Procedure)
		}
		seen[r.Procedure] = true
	}
	var specs []pipeline.Limit
	var paths []string
	groups := make([][]int, len(routes))
	for i, r := range routes {
		for j, l := range r.Limits {
			groups[i] = append(groups[i], len(specs))
			specs = append(specs, l)
			paths = append(paths, "routes["+strconv.Itoa(i)+"].limits["+strconv.Itoa(j)+"]")
		}
	}
	pl, err := pipeline.New(cfg, specs, paths, groups, numDefects)
	if err != nil {
		return nil, err
	}
	return &Door[K]{Pipeline: pl, Routes: newRoutes(routes, groups), Name: cfg.Name}, nil
}

// Call is a call as its transport reads it: its procedure, and functions over the call.
type Call[K any] struct {
	Procedure string
	// Key appends the call's key by k to dst, or reports that it has none (ok false: the
	// limit does not apply to the call).
	Key func(k K, dst []byte) (key []byte, ok bool)
	// Class reads the call's criticality class; it is called once, when a limit has Shares.
	Class func() sluice.Criticality
	// Cost, when not nil, returns the call's cost (otherwise 1). A cost below 1, or a panic,
	// is a defect of the application: logged and counted (Stats.BadInput), and the call costs
	// 1, so a call can neither refund quota nor pass for free.
	Cost func() int64
	// Wait is how long the call may wait for its slot (a client that shapes); 0: none.
	Wait time.Duration
}

// Check decides c under refs, the limits of the route its procedure matches (Routes.Match; a
// transport passes a call with none straight through): the call's Request (Done it when the
// call ends: it holds the call's in-flight slots until then), its outcome, and the answer
// (Code OK: run the call). A key function that panics is a defect of the application, logged
// and counted: the call is answered Internal.
func (d *Door[K]) Check(ctx context.Context, refs []Ref[K], c *Call[K]) (*pipeline.Request, pipeline.Outcome, Answer) {
	q := d.Pipeline.Get()
	if failed, ok := d.keys(q, refs, c, d.cost(c)); !ok {
		return q, pipeline.Outcome{}, Answer{Code: Internal, Message: d.Name + ": key function of limit " + strconv.Quote(failed) + " failed"}
	}
	if q.Empty() {
		return q, pipeline.Outcome{}, Answer{}
	}
	o := q.Decide(ctx, c.Wait)
	return q, o, d.answer(ctx, q, o)
}

// cost returns c's cost (see Call.Cost).
func (d *Door[K]) cost(c *Call[K]) (n int64) {
	if c.Cost == nil {
		return 1
	}
	defer func() {
		if p := recover(); p != nil {
			d.Pipeline.Defect(defectCost, d.Name+": cost function panicked; the call costs 1",
				procedure(c.Procedure), slog.Any("panic", p))
			n = 1
		}
	}()
	if n = c.Cost(); n < 1 {
		d.Pipeline.Defect(defectCost, d.Name+": cost function returned less than 1; the call costs 1",
			procedure(c.Procedure), slog.Int64("cost", n))
		n = 1
	}
	return n
}

// keys adds to q the key of each limit of refs that the call has, each costing n. When a key
// function panics it returns its limit's name and false, the defect reported.
func (d *Door[K]) keys(q *pipeline.Request, refs []Ref[K], c *Call[K], n int64) (limit string, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			d.Pipeline.Defect(defectKey, d.Name+": key function panicked; call refused with Internal",
				slog.String("limit", limit), procedure(c.Procedure), slog.Any("panic", p))
			ok = false
		}
	}()
	class, known := sluice.Critical, false
	for _, r := range refs {
		limit = d.Pipeline.Limit(r.Index).Name
		buf, has := c.Key(r.Key, q.Begin(r.Index))
		if !has {
			continue
		}
		if q.Classed(r.Index) && !known {
			class, known = c.Class(), true
		}
		q.Add(r.Index, buf, n, class)
	}
	return "", true
}

// procedure is the log attribute of a call's procedure: a copy, so that a Call's fields never
// leak (the closures a transport puts in it stay on its stack).
func procedure(p string) slog.Attr { return slog.String("procedure", strings.Clone(p)) }

// answer is the Answer to a decided call's outcome o.
func (d *Door[K]) answer(ctx context.Context, q *pipeline.Request, o pipeline.Outcome) Answer {
	switch o.Verdict {
	case pipeline.Deny:
		if o.Err != nil { // the call's context ended its wait for a slot
			return contextAnswer(o.Err)
		}
		return denial(d.Name, q.Checks(), o.Decision, q.Reset(o.Decision))
	case pipeline.Refuse:
		return refusal(d.Name, q.Refused())
	case pipeline.Unavailable:
		return Answer{Code: Unavailable, Message: d.Name + ": rate limiter unavailable"}
	case pipeline.Invalid:
		reason := "refused by the store"
		if fe, ok := o.Err.(*sluice.FieldError); ok {
			reason = fe.Reason
		}
		return Answer{Code: InvalidArgument, Message: d.Name + ": rate-limit key: " + reason}
	case pipeline.Canceled:
		return contextAnswer(ctx.Err())
	}
	return Answer{}
}
