// Package xds is a rule source that follows an xDS server: an ADS stream, State of the World,
// of envoyproxy/ratelimit's RateLimitConfig resources
// (type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig), as Envoy Gateway's
// controller serves them to the rate-limit service.
//
// Each snapshot is converted to rules documents (Documents) and compiled by package config,
// exactly as rules files are: a snapshot gives the same compiled rules as the same rules in
// YAML. A valid snapshot is applied and ACKed; an invalid one is NACKed with the problems and
// the rules in force keep serving. A lost stream reconnects with exponential backoff.
//
// A Client is an rls.RulesSource: set it as rls.Config.RulesSource and the engine runs it.
package xds
