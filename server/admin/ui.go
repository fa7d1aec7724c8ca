package admin

import (
	_ "embed"
	"html/template"
	"net/http"
	"sort"

	"github.com/sluicehq/sluice/rls"
)

// uiPage is the live view's page: one HTML file with inline CSS and script, no external
// asset. The server renders it with html/template (every key escaped), and its script
// refreshes it from /v1/top every two seconds, writing keys with textContent only.
//
//go:embed ui.html
var uiPage string

var uiTemplate = template.Must(template.New("ui").Parse(uiPage))

// uiData is what the page shows.
type uiData struct {
	rls.TopResponse
	// Denied are the keys being denied now, highest denied rate first.
	Denied []deniedKey
}

type deniedKey struct {
	Domain, Limit string
	rls.TopKey
}

// ui is GET /ui, the live view.
func (h handler) ui(w http.ResponseWriter, _ *http.Request) {
	top := h.Engine.Top(rls.ViewTopK)
	data := uiData{TopResponse: top}
	for _, d := range top.Domains {
		for i := range d.Limits {
			l := &d.Limits[i]
			for _, k := range l.Keys {
				if k.DeniedRate > 0 {
					data.Denied = append(data.Denied, deniedKey{Domain: d.Domain, Limit: l.Name, TopKey: k})
				}
			}
			l.Keys = l.Keys[:min(len(l.Keys), 10)] // the page shows the top 10 of each limit
		}
	}
	sort.SliceStable(data.Denied, func(i, j int) bool { return data.Denied[i].DeniedRate > data.Denied[j].DeniedRate })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := uiTemplate.Execute(w, data); err != nil {
		h.Engine.Logger().Error("ui: render", "err", err)
	}
}
