package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/gate"
	"github.com/sluicehq/sluice/internal/inflight"
)

// The gateways' doors (forwardauth.go, extauthz.go) decide a request the gateway asks about
// as sluice proxy decides the requests it forwards: package internal/gate. This file holds
// what they share on the server: the gate, their metrics and the in-flight slots held for
// the gateways' requests.

// LeaseHeader carries the id of the in-flight slots an admitted request holds (rules with a
// max_in_flight, Config.InFlight): POST /v1/leases/release with it gives them back; unreleased,
// they come back when their lease ends.
const LeaseHeader = "Sluice-Lease"

// ProblemHeader repeats the problem+json body of a forward-auth denial on one line, for
// gateways that keep no body of an auth answer (NGINX's auth_request).
const ProblemHeader = "Sluice-Problem"

// The doors, as labels of sluice_gateway_requests_total.
const (
	doorForwardAuth = iota
	doorExtAuthzHTTP
	doorExtAuthzGRPC
	doorCount
)

// outcomeLabels name the gate's outcomes in sluice_gateway_requests_total.
var outcomeLabels = [...]string{gate.Pass: "allowed", gate.Denied: "denied", gate.Refused: "denied",
	gate.Invalid: "invalid", gate.Unavailable: "unavailable", gate.UnknownDomain: "unknown_domain"}

// gatewayMetrics count the doors' answers by door and outcome, and the releases of their
// in-flight slots the store could not take.
type gatewayMetrics struct {
	requests        [doorCount][len(outcomeLabels)]prometheus.Counter
	releaseFailures prometheus.Counter
}

func newGatewayMetrics(reg prometheus.Registerer) (*gatewayMetrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_gateway_requests_total",
		Help: "Requests a gateway asked about, by door (forward_auth: NGINX, Caddy, Traefik; ext_authz_http, ext_authz_grpc: Envoy) and result: allowed, denied (429), invalid (400), unavailable (503: the store failed without a fallback), unknown_domain (404)."},
		[]string{"door", "result"})
	releases := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_gateway_lease_release_failures_total",
		Help: "Releases of the in-flight slots (max_in_flight) of requests a gateway asked about that the store could not take: each slot stays held until its lease expires."})
	for _, c := range []prometheus.Collector{requests, releases} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m := &gatewayMetrics{releaseFailures: releases}
	for d, door := range [doorCount]string{"forward_auth", "ext_authz_http", "ext_authz_grpc"} {
		for o, result := range outcomeLabels {
			m.requests[d][o] = requests.WithLabelValues(door, result)
		}
	}
	return m, nil
}

// count counts an answer of door.
func (m *gatewayMetrics) count(door int, o gate.Outcome) { m.requests[door][o].Inc() }

// newGate builds the gate of the doors: the engine, the trusted gateways, the header style.
func (s *Server) newGate() error {
	resolver, err := clientip.New(s.cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if err := gate.CheckLeaser(s.eng.Rules(), s.eng.Limiter().Store()); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if s.gatewayMetrics, err = newGatewayMetrics(s.registry); err != nil {
		return err
	}
	s.doors = gate.New(s.eng, resolver, s.cfg.GatewayHeaders, s.log, s.gatewayMetrics.releaseFailures.Inc)
	s.held = &heldSlots{m: make(map[string]*held)}
	return nil
}

// decideGateway decides sc's request (in domain; "" for every domain with a proxy
// section) for door, counting the outcome. After Pass, the request's in-flight slots are
// held under the returned lease id ("" when it holds none).
func (s *Server) decideGateway(ctx context.Context, door int, sc *gate.Scratch, domain string) (gate.Outcome, string) {
	o := s.doors.Decide(ctx, sc, domain)
	s.gatewayMetrics.count(door, o)
	if o != gate.Pass || len(sc.Claims) == 0 {
		return o, ""
	}
	return o, s.held.hold(sc.Claims)
}

// answerHTTP answers a request asked about over HTTP: 200 with the rate-limit headers (and
// the lease of its slots), or the gate's answer (429, 400, 404, 503), with the problem
// repeated in ProblemHeader when problemHeader.
func (s *Server) answerHTTP(w http.ResponseWriter, r *http.Request, door int, sc *gate.Scratch, domain string, problemHeader bool) {
	o, lease := s.decideGateway(r.Context(), door, sc, domain)
	if o == gate.Pass {
		s.doors.SetHeaders(w.Header(), sc)
		if lease != "" {
			w.Header().Set(LeaseHeader, lease)
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	if !problemHeader || (o != gate.Denied && o != gate.Refused) {
		s.doors.Write(r.Context(), w, sc, o, domain)
		return
	}
	var a gate.Answer
	s.doors.Write(r.Context(), &a, sc, o, domain)
	h := w.Header()
	for k, v := range a.Head {
		h[k] = v
	}
	h.Set(ProblemHeader, a.BodyLine())
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// handleRelease is POST /v1/leases/release: it gives back the slots held under the lease id
// in LeaseHeader (204), or answers 404 when none are (released already, or expired).
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	if !s.held.release(r.Header.Get(LeaseHeader)) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// heldSlots are the in-flight slots of requests admitted by a door, by lease id, until the
// gateway releases them or their lease ends: a gateway's auth hook does not see the request
// end, so the slot is held for its lease (the max_in_flight's lease, default
// sluice.DefaultLease) unless released first.
type heldSlots struct {
	mu     sync.Mutex
	m      map[string]*held
	closed bool
}

type held struct {
	claims []inflight.Claim
	start  time.Time
	timer  *time.Timer
}

// hold keeps claims (copied) under a new lease id, released when their shortest lease ends.
func (h *heldSlots) hold(claims []inflight.Claim) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	lease := sluice.MaxLease
	for i := range claims {
		lease = min(lease, leaseOf(claims[i].InFlight))
	}
	e := &held{claims: append([]inflight.Claim(nil), claims...), start: time.Now()}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		inflight.Release(e.claims, 0)
		return ""
	}
	h.m[id] = e
	e.timer = time.AfterFunc(lease, func() { h.release(id) })
	return id
}

func leaseOf(f sluice.InFlight) time.Duration {
	if f.Lease == 0 {
		return sluice.DefaultLease
	}
	return f.Lease
}

// release gives back the slots held under id and reports whether there were any.
func (h *heldSlots) release(id string) bool {
	h.mu.Lock()
	e := h.m[id]
	delete(h.m, id)
	h.mu.Unlock()
	if e == nil {
		return false
	}
	e.timer.Stop()
	inflight.Release(e.claims, time.Since(e.start))
	return true
}

// close gives back every slot held; later holds release at once.
func (h *heldSlots) close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.closed = true
	ids := make([]string, 0, len(h.m))
	for id := range h.m {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.release(id)
	}
}

// timeHTTP observes an HTTP request that started at start in the HTTP latency histogram.
func (s *Server) timeHTTP(start time.Time) {
	s.metrics.httpLatency.Observe(time.Since(start).Seconds())
}
