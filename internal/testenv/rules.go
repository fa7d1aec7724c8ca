package testenv

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/config"
)

// Rules compiles a rules document (YAML text) with the default options.
func Rules(t testing.TB, yaml string) *config.Config {
	t.Helper()
	doc, err := config.Decode("rules.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// MetricLine returns the line of g's metrics page (as /metrics serves it) that starts with
// prefix, or "".
func MetricLine(t testing.TB, g prometheus.Gatherer, prefix string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
