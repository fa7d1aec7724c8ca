// Package budget holds what a token or money budget needs around sluice.Limiter.Reserve and ReserveAll: the
// usage of an LLM call read where the provider writes it (Extractor: OpenAI's Chat Completions
// and Responses, Anthropic's Messages, as JSON and as server-sent events, or the caller's own),
// the estimate of a request before the call (Estimator: its max_tokens or max_output_tokens
// and the size of its prompt), a price table that turns usage into integer micro-units of
// money (Prices, from YAML), and a Meter that meters a streamed response against its
// reservation as it flows, extends the reservation in steps from the budget, cuts the stream
// within one event when both are spent (with an error event in the provider's shape), and
// commits what the response really cost, a client that went away included.
//
// The fixtures of the providers' wire formats under testdata are their own examples, copied
// verbatim (testdata/SOURCES.md names each file's source and version).
package budget
