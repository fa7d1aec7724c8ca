// Package admin is the operators' HTTP endpoints of a descriptor engine (package rls):
// GET /metrics, /healthz, /readyz and the live view GET /v1/top and /ui. Package server mounts
// them next to its rate-limit API; package proxy serves them on its admin address. It links
// no gRPC.
package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/rls"
)

// Config says what the endpoints serve.
type Config struct {
	// Engine is the engine whose store and live view are served. Required.
	Engine *rls.Engine
	// Metrics is the registry /metrics serves (the engine's series, package rlsmetrics, and
	// the transport's). Required.
	Metrics *prometheus.Registry
	// Serving reports whether the transport serves: /readyz answers 503 while it does not
	// (starting, shutting down). Nil: always serving.
	Serving func() bool
	// Waiting, when set, says why the transport is not ready yet ("" when it is): /readyz
	// answers 503 with it (server: until the store has answered once).
	Waiting func() string
	// Invalid, when set, is called for each request answered 400.
	Invalid func()
	// API lists the caller's own routes, which the index page GET / shows after the
	// operators' endpoints.
	API []Endpoint
}

// Handler returns a mux of GET /metrics, /healthz, /readyz, /v1/top, /ui (and /ui/) and the
// index page GET / that lists them with Config.API; the caller may add routes to it.
func Handler(c Config) *http.ServeMux {
	h := handler{c}
	reg := c.Metrics
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { WriteText(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", h.ready)
	mux.HandleFunc("GET /v1/top", h.top)
	mux.HandleFunc("GET /ui", h.ui)
	mux.HandleFunc("GET /ui/{$}", h.ui)
	mux.HandleFunc("GET /{$}", h.index)
	return mux
}

type handler struct{ Config }

// WriteText answers code with msg and a newline, as plain text.
func WriteText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// WriteJSON answers code with v in JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is the JSON body of an error answer: the message and the name of its gRPC code.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// ready answers 200 "ready" once serving while the store takes a write; 200 "degraded: ..."
// while a fallback decides because the store is unavailable (503 with ?strict); 503 while
// starting, shutting down, or when the store fails without a fallback.
func (h handler) ready(w http.ResponseWriter, r *http.Request) {
	if h.Serving != nil && !h.Serving() {
		WriteText(w, http.StatusServiceUnavailable, "not ready: starting or shutting down")
		return
	}
	if h.Waiting != nil {
		if why := h.Waiting(); why != "" {
			WriteText(w, http.StatusServiceUnavailable, "not ready: "+why)
			return
		}
	}
	why, err := h.Engine.Ready(r.Context())
	if err != nil {
		WriteText(w, http.StatusServiceUnavailable, "not ready: store: "+err.Error())
		return
	}
	if why != "" {
		code := http.StatusOK
		if r.URL.Query().Has("strict") {
			code = http.StatusServiceUnavailable
		}
		WriteText(w, code, "degraded: "+why)
		return
	}
	WriteText(w, http.StatusOK, "ready")
}

// top is GET /v1/top[?n=10]: per domain and limit, the n keys of highest rate (at most
// rls.ViewTopK) and the hot parameters' sketches.
func (h handler) top(w http.ResponseWriter, r *http.Request) {
	n := 10
	if q := r.URL.Query().Get("n"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 1 {
			if h.Invalid != nil {
				h.Invalid()
			}
			msg := rls.Invalidf("n: want a positive number, got %s", rls.Quote(q)).Error()
			WriteJSON(w, http.StatusBadRequest, ErrorBody{Error: msg, Code: rls.KindInvalid.String()})
			return
		}
		n = v
	}
	WriteJSON(w, http.StatusOK, h.Engine.Top(n))
}
