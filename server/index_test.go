package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestIndexPage: GET / lists the live view, the metrics and the API, each GET as a link;
// /ui/ answers the live view as /ui does; other paths stay 404.
func TestIndexPage(t *testing.T) {
	h := start(t, viewRules)
	page := get(t, h.base+"/")
	for _, want := range []string{`<a href="/ui">GET /ui</a>`, `<a href="/metrics">GET /metrics</a>`, "POST /v1/allow", "POST /v1/settle", `<a href="/v1/top">`} {
		if !strings.Contains(page, want) {
			t.Errorf("index page lacks %q:\n%s", want, page)
		}
	}
	if ui, slash := get(t, h.base+"/ui"), get(t, h.base+"/ui/"); !strings.Contains(slash, "<html") || len(slash) < len(ui)/2 {
		t.Errorf("/ui/ is not the live view:\n%s", slash)
	}
	if code, err := getCode(h.base + "/nope"); err != nil || code != http.StatusNotFound {
		t.Errorf("GET /nope: %d %v, want 404", code, err)
	}
}
