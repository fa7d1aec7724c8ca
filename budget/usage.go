package budget

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Usage is what one LLM call used, in tokens.
type Usage struct {
	// Model is the model that served the call, as the provider names it ("" when unknown).
	Model string
	// InputTokens are the prompt's tokens, those read from the provider's cache and those
	// written to it included (OpenAI's prompt_tokens or input_tokens; Anthropic's
	// input_tokens + cache_read_input_tokens + cache_creation_input_tokens).
	InputTokens int64
	// CachedInputTokens are the part of InputTokens read from the provider's cache
	// (OpenAI's cached_tokens; Anthropic's cache_read_input_tokens), priced apart.
	CachedInputTokens int64
	// OutputTokens are the generated tokens, reasoning included.
	OutputTokens int64
}

// Tokens returns every token of the call: InputTokens + OutputTokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// An Extractor reads an LLM call's usage from its response: the whole body of a response that
// is not streamed, or each event of a server-sent event stream. The package's extractors are
// OpenAI and Anthropic; a caller with another provider writes its own. Implementations are
// safe for concurrent use (they keep no state of a stream: the meter keeps it).
type Extractor interface {
	// Body reads the usage of a whole JSON response; ok is false when it holds none.
	Body(body []byte) (u Usage, ok bool)
	// Event reads one event of a stream, of type typ ("" when the event names none) and
	// data data, into u, the stream's usage so far; it reports whether the event carried
	// usage. Usage a provider reports as running totals replaces u's; usage reported in
	// parts adds to it.
	Event(typ string, data []byte, u *Usage) (ok bool)
	// CutEvent returns the event that ends a stream cut for want of budget, whole (its
	// blank line included), in the provider's shape for an error in a stream, so its
	// clients' SDKs raise it as an error. last is the type of the stream's last event.
	CutEvent(last string, message string) []byte
}

// The providers' extractors.
var (
	// OpenAI reads OpenAI's Chat Completions (usage.prompt_tokens, completion_tokens,
	// prompt_tokens_details.cached_tokens; streamed, the chunk of usage sent before
	// `data: [DONE]` when the request asks for it with stream_options.include_usage, summed
	// over chunks as openai-go's ChatCompletionAccumulator sums them) and its Responses API
	// (usage.input_tokens, output_tokens, input_tokens_details.cached_tokens; streamed, the
	// usage of the response.completed, response.incomplete or response.failed event).
	OpenAI Extractor = openAI{}
	// Anthropic reads Anthropic's Messages API (usage.input_tokens, output_tokens,
	// cache_read_input_tokens, cache_creation_input_tokens; streamed, message_start's usage
	// and then message_delta's running totals).
	Anthropic Extractor = anthropic{}
)

// openAIUsage is the usage object of both OpenAI APIs.
type openAIUsage struct {
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    int64  `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokens        *int64 `json:"input_tokens"`
	OutputTokens       int64  `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// usage returns u as a Usage, ok false when it holds neither API's fields.
func (u *openAIUsage) usage(model string) (Usage, bool) {
	switch {
	case u == nil:
		return Usage{}, false
	case u.PromptTokens != nil: // Chat Completions
		out := Usage{Model: model, InputTokens: *u.PromptTokens, OutputTokens: u.CompletionTokens}
		if u.PromptTokensDetails != nil {
			out.CachedInputTokens = u.PromptTokensDetails.CachedTokens
		}
		return out, true
	case u.InputTokens != nil: // Responses
		out := Usage{Model: model, InputTokens: *u.InputTokens, OutputTokens: u.OutputTokens}
		if u.InputTokensDetails != nil {
			out.CachedInputTokens = u.InputTokensDetails.CachedTokens
		}
		return out, true
	}
	return Usage{}, false
}

// openAIBody is a Chat Completions response or chunk, or a Responses response.
type openAIBody struct {
	Model string       `json:"model"`
	Usage *openAIUsage `json:"usage"`
}

// openAIEvent is a Responses API stream event (a Chat Completions chunk has no "response").
type openAIEvent struct {
	openAIBody
	Type           string      `json:"type"`
	SequenceNumber *int64      `json:"sequence_number"`
	Response       *openAIBody `json:"response"`
}

type openAI struct{}

func (openAI) Body(body []byte) (Usage, bool) {
	var b openAIBody
	if json.Unmarshal(body, &b) != nil {
		return Usage{}, false
	}
	return b.Usage.usage(b.Model)
}

func (openAI) Event(typ string, data []byte, u *Usage) bool {
	if !bytes.Contains(data, []byte(`"usage"`)) { // most events: no need to decode them
		return false
	}
	var e openAIEvent
	if json.Unmarshal(data, &e) != nil {
		return false
	}
	if e.Response != nil { // Responses: the final event's response carries the usage
		got, ok := e.Response.Usage.usage(e.Response.Model)
		if ok {
			*u = got
		}
		return ok
	}
	got, ok := e.Usage.usage(e.Model) // a Chat Completions chunk
	if !ok {
		return false
	}
	u.Model = got.Model
	u.InputTokens += got.InputTokens
	u.CachedInputTokens += got.CachedInputTokens
	u.OutputTokens += got.OutputTokens
	return true
}

// CutEvent is an error in the shape of the API the stream is of: a Responses stream (whose
// events are named response.*) ends with an `error` event (ResponseErrorEvent: type, code,
// message, param, sequence_number); a Chat Completions stream with a chunk holding an
// "error" object (code, message, param, type), which the SDKs raise, and then `data: [DONE]`.
func (openAI) CutEvent(last, message string) []byte {
	code := "budget_exhausted"
	if strings.HasPrefix(last, "response.") {
		e, _ := json.Marshal(struct {
			Type           string  `json:"type"`
			Code           string  `json:"code"`
			Message        string  `json:"message"`
			Param          *string `json:"param"`
			SequenceNumber int64   `json:"sequence_number"`
		}{"error", code, message, nil, 0})
		return []byte("event: error\ndata: " + string(e) + "\n\n")
	}
	e, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "insufficient_quota", "param": nil, "code": code}})
	return []byte("data: " + string(e) + "\n\ndata: [DONE]\n\n")
}

// anthropicUsage is the usage object of Anthropic's Messages API.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
}

// into sets the fields u reports on out; ok false when it reports none.
func (u *anthropicUsage) into(out *Usage) bool {
	if u == nil {
		return false
	}
	if u.InputTokens != nil {
		out.InputTokens = *u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		out.CachedInputTokens = u.CacheReadInputTokens
	}
	out.OutputTokens = u.OutputTokens
	return true
}

type anthropicBody struct {
	Model string          `json:"model"`
	Usage *anthropicUsage `json:"usage"`
}

type anthropicEvent struct {
	Type    string          `json:"type"`
	Message *anthropicBody  `json:"message"` // message_start
	Usage   *anthropicUsage `json:"usage"`   // message_delta: running totals
}

type anthropic struct{}

func (anthropic) Body(body []byte) (Usage, bool) {
	var b anthropicBody
	if json.Unmarshal(body, &b) != nil {
		return Usage{}, false
	}
	u := Usage{Model: b.Model}
	return u, b.Usage.into(&u)
}

func (anthropic) Event(typ string, data []byte, u *Usage) bool {
	if typ != "message_start" && typ != "message_delta" {
		return false
	}
	var e anthropicEvent
	if json.Unmarshal(data, &e) != nil {
		return false
	}
	if e.Message != nil {
		u.Model = e.Message.Model
		return e.Message.Usage.into(u)
	}
	return e.Usage.into(u)
}

// CutEvent is Anthropic's error event of a stream: `event: error` and {"type": "error",
// "error": {"type", "message"}}, as its SDKs raise it.
func (anthropic) CutEvent(_, message string) []byte {
	e, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error", "message": message}})
	return []byte("event: error\ndata: " + string(e) + "\n\n")
}
