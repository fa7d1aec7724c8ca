package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server/admin"
)

// appendClaims appends the in-flight claims of the verdicts of one domain's answer: every
// descriptor whose limit has a max_in_flight (shadow-mode limits take no slot).
func appendClaims(claims []inflight.Claim, vs []rls.Verdict) []inflight.Claim {
	for i := range vs {
		v := &vs[i]
		if v.Key == "" || v.Limit == nil || v.Limit.InFlight == nil || v.Limit.ShadowMode {
			continue
		}
		claims = append(claims, inflight.Claim{Name: v.Limit.Name, Key: v.Key, Limit: v.Limit.InFlight.InFlight, Adaptive: v.Adaptive})
	}
	return claims
}

// acquire takes the slots of sc's claims for r and reports whether r may be forwarded;
// otherwise it has answered: 429 or 503 (an adaptive limit) as httplimit.WriteRefused, or as
// refuse does for a store that failed.
func (p *Proxy) acquire(w http.ResponseWriter, r *http.Request, sc *scratch) bool {
	i, err := inflight.Acquire(r.Context(), p.leases, sc.claims)
	if err != nil {
		p.refuse(w, r, p.eng.StoreError(r.Context(), err))
		return false
	}
	if i < 0 {
		return true
	}
	c := &sc.claims[i]
	p.metrics.denied.Inc()
	httplimit.WriteRefused(w, r, sc.results, httplimit.Result{Name: c.Name, Decision: c.Decision()}, c.Overload())
	return false
}

// releaseFailed counts and logs (at most once a second) a release of an in-flight slot the
// store could not take, the proxy's own or the background release of a failed acquire: the
// slot stays held until its lease expires. Neither the key nor the store's message is
// logged: a key may hold a client's secret.
func (p *Proxy) releaseFailed(err error) {
	p.metrics.releaseFailures.Inc()
	cause := "unavailable"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		cause = "timeout"
	case !sluice.IsUnavailable(err):
		cause = "other"
	}
	p.releaseLog.Log(context.Background(), p.log, time.Now(), slog.LevelWarn,
		"in-flight slot not released: the store could not take the release; the slot stays held until its lease expires",
		slog.String("cause", cause))
}

// clearLeases answers the admin endpoint DELETE /v1/leases: it frees at once every slot of the
// max_in_flight of one descriptor, named as in the rules, {"domain": "edge", "entries":
// [{"key": "route", "value": "/export"}]}: the operator's way out when holders were killed
// holding long leases. It answers {"cleared": N}, the live slots freed (their holders are not
// told: their releases do nothing); 400 for a malformed body or a descriptor no limit with a
// max_in_flight matches, 503 when the store fails. The line it logs names the domain and the
// entries' keys, not their values (a value may be a client's secret).
func (p *Proxy) clearLeases(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Domain  string `json:"domain"`
		Entries []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"entries"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		admin.WriteJSON(w, http.StatusBadRequest, admin.ErrorBody{Error: "proxy: leases: body: " + err.Error(), Code: "INVALID_ARGUMENT"})
		return
	}
	entries := make([]rls.Entry, len(body.Entries))
	keys := make([]string, len(body.Entries))
	for i, e := range body.Entries {
		entries[i], keys[i] = rls.Entry{Key: e.Key, Value: e.Value}, e.Key
	}
	key, err := p.eng.InFlightKey(body.Domain, entries)
	if err != nil {
		code, status := "INVALID_ARGUMENT", http.StatusBadRequest
		if rls.KindOf(err) != rls.KindInvalid {
			code, status = "UNAVAILABLE", http.StatusServiceUnavailable
		}
		admin.WriteJSON(w, status, admin.ErrorBody{Error: "proxy: leases: " + err.Error(), Code: code})
		return
	}
	c, ok := p.eng.Limiter().Store().(sluice.LeaseClearer)
	if !ok {
		admin.WriteJSON(w, http.StatusNotImplemented, admin.ErrorBody{Error: "proxy: leases: the store cannot clear leases", Code: "UNIMPLEMENTED"})
		return
	}
	n, err := c.ClearLeases(r.Context(), key)
	if err != nil {
		admin.WriteJSON(w, http.StatusServiceUnavailable, admin.ErrorBody{Error: "proxy: leases: the store could not clear them", Code: "UNAVAILABLE"})
		return
	}
	p.log.Warn("admin: cleared the in-flight slots of a descriptor", "domain", body.Domain, "entry_keys", keys, "cleared", n)
	admin.WriteJSON(w, http.StatusOK, struct {
		Cleared int64 `json:"cleared"`
	}{n})
}

// checkLeaser refuses rules with a max_in_flight over a store that keeps no leases.
func checkLeaser(c *config.Config, st sluice.Store) error {
	if _, ok := st.(sluice.Leaser); ok || c == nil {
		return nil
	}
	for _, l := range c.Limits() {
		if l.InFlight != nil {
			return fmt.Errorf("proxy: rules: %s:%d: %s has a max_in_flight, but the store keeps no leases: %w", l.File, l.Line, l.FullKey, sluice.ErrNoLeaser)
		}
	}
	return nil
}
