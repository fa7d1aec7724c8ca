package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server/admin"
)

// The proxy's in-flight slots (max_in_flight) are taken and given back by its gate (package
// internal/gate), which counts a failed release in sluice_proxy_lease_release_failures_total.

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
