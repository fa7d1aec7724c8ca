// Package rls is Sluice's descriptor engine: Envoy's rate-limit descriptors decided against
// rules loaded by package config (a file or directory, hot-reloaded, or static rules), on a
// store, with no listener. Package server serves it over the Envoy RLS v3 gRPC API and HTTP;
// package proxy feeds it HTTP requests.
//
// An Engine holds the rules set in force, taken from one RulesSource (rules files, xDS),
// builds the store keys of descriptors, tracks hot parameters, applies criticality shares,
// per-instance (layered) limits and the bounds of requests, decides (Engine.Decide), and
// tells an Observer every decision: package server/rlsmetrics counts them in Prometheus
// series, Sluice's and envoyproxy/ratelimit's. The engine links no metrics client; its time
// is Config.Clock's. A limit's runtime state (its sketches, its adaptive in-flight limit, its
// observer) is created at its first decision and carried over reloads that keep the limit, so
// rule sets of many limits cost little until they are used.
//
// Decisions are envoyproxy/ratelimit's (an unknown domain, an unmatched or unlimited
// descriptor are OK without a store call; quota mode, shadow mode, whole-second resets) but
// for the differences docs/OPERATIONS.md lists, each with its switch: every limit of every
// descriptor of a request must pass, and when one does not, nothing is consumed from any of
// them (see sluice.Limiter.AllowAll; Config.CountDenied decides as the peer). Shadow-mode and
// quota-mode descriptors are decided on their own. Malformed requests are refused with an
// Error of KindInvalid before any store call; an unavailable store gives KindUnavailable.
//
// A rule a request brings (the key form's rule, a descriptor's limit override) is held to
// ceilings on its sliding-log limit, its period and its state per key
// (Config.MaxRequestLogLimit, MaxRequestPeriod, MaxRequestStateBytes); Config.RequestRules
// restricts requests to limits named from the config, or refuses their rules.
package rls
