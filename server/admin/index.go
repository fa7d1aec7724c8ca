package admin

import (
	"html/template"
	"net/http"
)

// Endpoint is one route the index page lists: method, path and what it answers.
type Endpoint struct{ Method, Path, What string }

// endpoints are the operators' routes.
var endpoints = []Endpoint{
	{"GET", "/ui", "the live view: the top keys of every limit, the denied ones, the store's health"},
	{"GET", "/v1/top", "the live view's data in JSON"},
	{"GET", "/metrics", "Prometheus metrics"},
	{"GET", "/healthz", "liveness"},
	{"GET", "/readyz", "readiness: the store takes a write (?strict also fails while a fallback decides)"},
}

var indexPage = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sluice</title></head>
<body><h1>Sluice</h1>
<ul>
{{range .}}<li>{{if eq .Method "GET"}}<a href="{{.Path}}">{{.Method}} {{.Path}}</a>{{else}}{{.Method}} {{.Path}}{{end}}: {{.What}}</li>
{{end}}</ul>
<p>See <a href="https://github.com/sluicehq/sluice#readme">the README</a> and
<a href="https://github.com/sluicehq/sluice/blob/main/docs/OPERATIONS.md">docs/OPERATIONS.md</a>.</p>
</body></html>
`))

// index answers GET / with the list of endpoints: the operators' first, then Config.API.
func (h handler) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexPage.Execute(w, append(endpoints[:len(endpoints):len(endpoints)], h.API...))
}
