package rpclimit

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/pipeline"
)

// Key appends the key of call (what the transport reads of a call: gRPC's full method name,
// Connect's Call) to dst, or reports that it has none (ok false: the limit does not apply to
// the call). grpclimit.Key and connectlimit.Key are Keys; a nil Key keys every call alike.
type Key[C any] = func(ctx context.Context, call C, dst []byte) (key []byte, ok bool)

// Route is a transport's route as the pipeline decides it: the procedure it matches (see
// Routes.Match), and its limits, each with the key the transport reads it by (Keys[i] is
// Limits[i]'s).
type Route[C any] struct {
	Procedure string
	Limits    []pipeline.Limit
	Keys      []Key[C]
}

// Ref is a limit of a route: the pipeline's limit and how the route keys calls by it.
type Ref[C any] struct {
	Index int
	Key   Key[C]
}

// Routes finds a call's limits: an exact procedure first, then its service, then the
// default. Lookups take a substring of the procedure and allocate nothing. It is immutable,
// safe for concurrent use.
type Routes[C any] struct {
	methods  map[string][]Ref[C]
	services map[string][]Ref[C]
	others   []Ref[C]
	empty    bool // no route has a limit
}

// checkProcedure accepts "", "/pkg.Service/" and "/pkg.Service/Method".
func checkProcedure(m string) error {
	if m == "" {
		return nil
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	if !strings.HasPrefix(m, "/") || !ok || svc == "" || strings.Contains(method, "/") {
		return fmt.Errorf("%q: want \"/pkg.Service/Method\", \"/pkg.Service/\" or \"\" (every other call)", m)
	}
	return nil
}

// Match returns the limits of the call to procedure.
func (t *Routes[C]) Match(procedure string) []Ref[C] {
	if t.empty {
		return nil
	}
	if l, ok := t.methods[procedure]; ok {
		return l
	}
	if i := strings.LastIndexByte(procedure, '/'); i > 0 {
		if l, ok := t.services[procedure[:i+1]]; ok {
			return l
		}
	}
	return t.others
}

// newRoutes indexes routes, whose limits are the pipeline's limits groups[i] (in order).
func newRoutes[C any](routes []Route[C], groups [][]int) *Routes[C] {
	t := &Routes[C]{methods: map[string][]Ref[C]{}, services: map[string][]Ref[C]{}, empty: true}
	for i, r := range routes {
		var refs []Ref[C]
		for j, k := range groups[i] {
			refs = append(refs, Ref[C]{Index: k, Key: r.Keys[j]})
			t.empty = false
		}
		switch {
		case r.Procedure == "":
			t.others = refs
		case strings.HasSuffix(r.Procedure, "/"):
			t.services[r.Procedure] = refs
		default:
			t.methods[r.Procedure] = refs
		}
	}
	return t
}
