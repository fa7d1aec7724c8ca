package rpclimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// Door is an RPC transport's limits over its calls (C: what it reads of a call): its pipeline,
// the routes that find a call's limits, its name ("grpclimit"), which starts its log lines and
// answers, and how it reads a call's class and cost. It is safe for concurrent use.
type Door[C any] struct {
	Pipeline *pipeline.Pipeline
	Routes   *Routes[C]
	Name     string
	// Class reads a call's criticality class; it is called once, when a limit has Shares.
	Class func(ctx context.Context, call C) sluice.Criticality
	// Cost, when not nil, returns a call's cost (otherwise 1); msg is Check's. A cost below
	// 1, or a panic, is a defect of the application: logged and counted (Stats.BadInput), and
	// the call costs 1, so a call can neither refund quota nor pass for free.
	Cost func(ctx context.Context, call C, msg any) int64
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
// route a group, and the routes' index. The transport sets the door's Class and Cost.
func Compile[C any](cfg pipeline.Config, field string, routes []Route[C]) (*Door[C], error) {
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
	return &Door[C]{Pipeline: pl, Routes: newRoutes(routes, groups), Name: cfg.Name}, nil
}

// Check decides call, to procedure, under refs, the limits of the route it matches
// (Routes.Match; a transport passes a call with none straight through): msg is what Cost is
// given (a unary call's request message), wait how long the call may wait for its slot (a
// client that shapes; 0: none). It returns the call's Request (Done it when the call ends: it
// holds the call's in-flight slots until then), its outcome, and the answer that refuses it
// (nil: run it). A key function that panics is a defect of the application, logged and
// counted: the call is answered Internal.
func (d *Door[C]) Check(ctx context.Context, procedure string, refs []Ref[C], call C, msg any, wait time.Duration) (*pipeline.Request, pipeline.Outcome, *Answer) {
	q := d.Pipeline.Get()
	n := int64(1)
	if d.Cost != nil {
		n = d.cost(ctx, procedure, call, msg)
	}
	if failed, ok := d.keys(ctx, q, procedure, refs, call, n); !ok {
		return q, pipeline.Outcome{}, &Answer{Code: Internal, Message: d.Name + ": key function of limit " + strconv.Quote(failed) + " failed"}
	}
	if q.Empty() {
		return q, pipeline.Outcome{}, nil
	}
	o := q.Decide(ctx, wait)
	if o.Answer == pipeline.Pass {
		return q, o, nil
	}
	a := d.answer(ctx, q, o)
	return q, o, &a
}

// cost returns call's cost (see Door.Cost).
func (d *Door[C]) cost(ctx context.Context, procedure string, call C, msg any) (n int64) {
	defer func() {
		if p := recover(); p != nil {
			d.Pipeline.Defect(defectCost, d.Name+": cost function panicked; the call costs 1", slog.String("procedure", procedure), slog.Any("panic", p))
			n = 1
		}
	}()
	if n = d.Cost(ctx, call, msg); n < 1 {
		d.Pipeline.Defect(defectCost, d.Name+": cost function returned less than 1; the call costs 1", slog.String("procedure", procedure), slog.Int64("cost", n))
		n = 1
	}
	return n
}

// keys adds to q the key of each limit of refs that call has, each costing n. When a key
// function panics it returns its limit's name and false, the defect reported.
func (d *Door[C]) keys(ctx context.Context, q *pipeline.Request, procedure string, refs []Ref[C], call C, n int64) (limit string, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			d.Pipeline.Defect(defectKey, d.Name+": key function panicked; call refused with Internal",
				slog.String("limit", limit), slog.String("procedure", procedure), slog.Any("panic", p))
			ok = false
		}
	}()
	class, known := sluice.Critical, false
	for _, r := range refs {
		buf := q.Begin(r.Index)
		if r.Key != nil {
			limit = d.Pipeline.Limit(r.Index).Name
			var has bool
			if buf, has = r.Key(ctx, call, buf); !has {
				continue
			}
		}
		if q.Classed(r.Index) && !known {
			class, known = d.Class(ctx, call), true
		}
		q.Add(r.Index, buf, n, class)
	}
	return "", true
}

// answer is the Answer to a decided call's outcome o, not Pass.
func (d *Door[C]) answer(ctx context.Context, q *pipeline.Request, o pipeline.Outcome) Answer {
	switch o.Answer {
	case pipeline.Deny:
		if o.Err != nil { // the call's context ended its wait for a slot
			return contextAnswer(o.Err)
		}
		checks := q.Checks()
		if b := q.BudgetChecks(); len(b) > 0 { // a budget that refused is named too
			checks = append(checks[:len(checks):len(checks)], b...)
		}
		return denial(d.Name, checks, o.Decision, q.Reset(o.Decision))
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
	}
	return contextAnswer(ctx.Err()) // Canceled
}
