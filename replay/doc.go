// Package replay puts recorded traffic through rules: it reads access logs as they are
// (Envoy's default text format and its JSON, nginx's and Apache's combined format, JSON lines
// and CSV with a field mapping, gzip or not), turns each line into descriptors by the rules'
// own proxy section (the function sluice proxy builds a live request's with,
// proxy.Descriptors), and decides them with the engine sluice serve and sluice proxy decide
// with (rls.Engine) on any store, at their recorded instants on a virtual clock, as fast as
// the machine allows.
//
// Beside every decision stands the exact reference of package simulate: a perfect sliding
// log of the units the rule admitted (simulate.Window), so every would-be denial is marked as
// one the exact reference makes too, or not. Run reports, per rule and per client key, the
// requests, would-be denials, first denial, the per-client rates over the rule's period
// (peak, p50, p90, p99) and the top denied clients (values hashed as in telemetry, unless
// the rule says telemetry: raw); Compare names the clients whose outcome two rule sets
// change; Suggest proposes a limit per rule from the per-client rates and writes it as a
// rules file with its evidence.
//
// Memory is bounded whatever the number of distinct clients: a client's windows are freed
// once it has been idle for a period, and at most Config.MaxClients client summaries are
// kept per rule (the least recently seen are then folded into the rule's rate distribution).
// Command sluice replay and sluice suggest are the command-line front ends.
package replay
