package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Estimator estimates an LLM request's usage before the call, from its JSON body: its prompt
// (messages, input, prompt, system, instructions) at BytesPerToken bytes a token, and the most
// it may generate (max_tokens, max_completion_tokens or max_output_tokens, else
// DefaultOutput). Its zero value counts 4 bytes a token and 4,096 output tokens by default.
type Estimator struct {
	// BytesPerToken is the prompt's bytes per token (0 means 4). A prompt's tokens never
	// outnumber its bytes for the providers' tokenizers, so 1 makes the estimate a bound
	// on the input (for a Strict budget that must never be exceeded).
	BytesPerToken float64
	// DefaultOutput is the output of a request that states no maximum (0 means 4,096).
	DefaultOutput int64
	// MaxOutput caps the output estimate (0: none), so a request asking for a huge maximum
	// is held for at most this much.
	MaxOutput int64
}

// ErrBadRequest reports a request body an Estimator cannot read: not a JSON object, or a
// maximum that is not a non-negative integer. The error names the field.
var ErrBadRequest = errors.New("budget: bad request")

// request holds the fields of the providers' request bodies that an estimate reads.
type request struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Input               json.RawMessage `json:"input"`
	Prompt              json.RawMessage `json:"prompt"`
	System              json.RawMessage `json:"system"`
	Instructions        json.RawMessage `json:"instructions"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MaxOutputTokens     *int64          `json:"max_output_tokens"`
	Stream              bool            `json:"stream"`
}

// Estimate is what an Estimator reads of a request.
type Estimate struct {
	// Usage is the estimated usage: Model, InputTokens (the prompt's), OutputTokens (the
	// most the request may generate).
	Usage
	// Stream reports whether the request asks for a streamed response.
	Stream bool
}

// Request estimates the usage of the request whose JSON body is body.
func (e Estimator) Request(body []byte) (Estimate, error) {
	var r request
	if err := json.Unmarshal(body, &r); err != nil {
		return Estimate{}, badBody(err)
	}
	bpt := e.BytesPerToken
	if bpt <= 0 {
		bpt = 4
	}
	size := len(r.Messages) + len(r.Input) + len(r.Prompt) + len(r.System) + len(r.Instructions)
	in := int64(float64(size)/bpt + 0.999999)
	out := e.DefaultOutput
	if out <= 0 {
		out = 4096
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"max_tokens", r.MaxTokens}, {"max_completion_tokens", r.MaxCompletionTokens}, {"max_output_tokens", r.MaxOutputTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return Estimate{}, fmt.Errorf("%w: %s: negative", ErrBadRequest, f.name)
		}
		out = *f.v
	}
	if e.MaxOutput > 0 {
		out = min(out, e.MaxOutput)
	}
	return Estimate{Usage: Usage{Model: r.Model, InputTokens: in, OutputTokens: out}, Stream: r.Stream}, nil
}

// badBody is the error of a body json.Unmarshal refused: it names the field of the wrong type,
// or the byte where the body stops being JSON, and never repeats the body's bytes (values of
// the request).
func badBody(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		got, _, _ := strings.Cut(te.Value, " ") // "number 1.5": the kind alone
		if te.Field == "" {
			return fmt.Errorf("%w: body: want a JSON object, got a JSON %s", ErrBadRequest, got)
		}
		want := "a string" // model
		switch te.Type.Kind() {
		case reflect.Int64:
			want = "a whole number"
		case reflect.Bool:
			want = "true or false"
		}
		return fmt.Errorf("%w: %s: want %s, got a JSON %s", ErrBadRequest, te.Field, want, got)
	case errors.As(err, &se):
		return fmt.Errorf("%w: body: not JSON (at byte %d)", ErrBadRequest, se.Offset)
	}
	return fmt.Errorf("%w: body: not a JSON request object", ErrBadRequest)
}
