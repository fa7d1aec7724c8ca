package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const adminRules = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 2}
`

// TestAdminHandler serves the operators' endpoints only, not the rate-limit API.
func TestAdminHandler(t *testing.T) {
	h := start(t, adminRules)
	admin := h.srv.AdminHandler()
	for _, path := range []string{"GET /metrics", "GET /healthz", "GET /readyz", "POST /v1/allow", "POST /json"} {
		method, target, _ := strings.Cut(path, " ")
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		if api := method == http.MethodPost; api != (rec.Code == http.StatusNotFound) {
			t.Errorf("%s: %d; want 404 for the API only", path, rec.Code)
		}
	}
}
