package budget_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/budget"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// event is one server-sent event.
type event struct {
	typ  string
	data string
}

// events splits a server-sent event stream into its events (types and joined data lines).
func events(stream []byte) []event {
	var out []event
	var cur event
	has := false
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		switch {
		case l == "":
			if has {
				out = append(out, cur)
			}
			cur, has = event{}, false
		case strings.HasPrefix(l, "event:"):
			cur.typ, has = strings.TrimSpace(l[len("event:"):]), true
		case strings.HasPrefix(l, "data:"):
			if cur.data != "" {
				cur.data += "\n"
			}
			cur.data += strings.TrimPrefix(l[len("data:"):], " ")
			has = true
		}
	}
	if has {
		out = append(out, cur)
	}
	return out
}

// TestExtractorsReadTheProvidersExamples: each extractor reads the usage of its provider's own
// examples (testdata/SOURCES.md), whole and streamed.
func TestExtractorsReadTheProvidersExamples(t *testing.T) {
	for _, c := range []struct {
		file string
		x    budget.Extractor
		want budget.Usage
	}{
		{"openai_chat.json", budget.OpenAI, budget.Usage{Model: "gpt-5.4", InputTokens: 19, OutputTokens: 10}},
		{"openai_responses.json", budget.OpenAI, budget.Usage{Model: "gpt-5.4", InputTokens: 36, OutputTokens: 87}},
		{"anthropic_messages.json", budget.Anthropic, budget.Usage{Model: "claude-3-7-sonnet-20250219", InputTokens: 402, OutputTokens: 89}},
		// openai-go's accumulator sums the fixture's two usage chunks: 10 + 0 prompt, 100 +
		// 50 completion, 20 + 10 cached
		{"openai_chat.sse", budget.OpenAI, budget.Usage{Model: "gpt-4o-2024-05-13", InputTokens: 10, CachedInputTokens: 30, OutputTokens: 150}},
		{"openai_responses.sse", budget.OpenAI, budget.Usage{Model: "gpt-5.4", InputTokens: 37, OutputTokens: 11}},
		{"anthropic_messages.sse", budget.Anthropic, budget.Usage{Model: "claude-3-7-sonnet-20250219", InputTokens: 394, OutputTokens: 79}},
	} {
		b := fixture(t, c.file)
		var got budget.Usage
		var ok bool
		if strings.HasSuffix(c.file, ".sse") {
			for _, e := range events(b) {
				if c.x.Event(e.typ, []byte(e.data), &got) {
					ok = true
				}
			}
		} else {
			got, ok = c.x.Body(b)
		}
		if !ok || got != c.want {
			t.Errorf("%s: %+v (found %v), want %+v", c.file, got, ok, c.want)
		}
	}
	// no usage: nothing found
	if _, ok := budget.OpenAI.Body([]byte(`{"id":"x"}`)); ok {
		t.Error("OpenAI found usage in a body without one")
	}
	if _, ok := budget.Anthropic.Body([]byte(`not json`)); ok {
		t.Error("Anthropic found usage in a body that is not JSON")
	}
}

// keysOf returns the keys of a JSON object, sorted.
func keysOf(t *testing.T, raw string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestCutEventsHaveTheProvidersShapes: the event ending a stream cut for want of budget has the
// shape of its provider's own stream error: Anthropic's error event (SDK's TestStreamingErrorType),
// OpenAI's ResponseErrorEvent in a Responses stream, and in a Chat Completions stream a chunk
// with an "error" object of the fields OpenAI's Error schema requires (which openai-go's stream
// raises), then [DONE].
func TestCutEventsHaveTheProvidersShapes(t *testing.T) {
	ant := events(fixture(t, "anthropic_error.sse"))[0]
	cut := events(budget.Anthropic.CutEvent("content_block_delta", "budget exhausted"))
	if len(cut) != 1 || cut[0].typ != ant.typ {
		t.Fatalf("anthropic cut %+v, want one %q event", cut, ant.typ)
	}
	if g, w := keysOf(t, cut[0].data), keysOf(t, ant.data); !reflect.DeepEqual(g, w) {
		t.Errorf("anthropic cut keys %v, want %v", g, w)
	}
	var inner struct{ Error map[string]json.RawMessage }
	json.Unmarshal([]byte(cut[0].data), &inner)
	var want struct{ Error map[string]json.RawMessage }
	json.Unmarshal([]byte(ant.data), &want)
	if len(inner.Error) != len(want.Error) || inner.Error["type"] == nil || inner.Error["message"] == nil {
		t.Errorf("anthropic cut error %s, want the fields of %s", cut[0].data, ant.data)
	}

	resp := events(budget.OpenAI.CutEvent("response.output_text.delta", "budget exhausted"))
	if len(resp) != 1 || resp[0].typ != "error" {
		t.Fatalf("responses cut %+v", resp)
	}
	if g, w := keysOf(t, resp[0].data), keysOf(t, string(fixture(t, "openai_responses_error.json"))); !reflect.DeepEqual(g, w) {
		t.Errorf("responses cut keys %v, want the spec's example's %v", g, w)
	}

	chat := events(budget.OpenAI.CutEvent("", "budget exhausted"))
	if len(chat) != 2 || chat[1].data != "[DONE]" {
		t.Fatalf("chat cut %+v, want an error chunk and [DONE]", chat)
	}
	var schema map[string]struct {
		Required []string `yaml:"required"`
	}
	if err := yaml.Unmarshal(fixture(t, "openai_error_schema.yaml"), &schema); err != nil {
		t.Fatal(err)
	}
	var errChunk struct {
		Error json.RawMessage `json:"error"`
	}
	json.Unmarshal([]byte(chat[0].data), &errChunk)
	required := slices.Sorted(slices.Values(schema["Error"].Required))
	if g := keysOf(t, string(errChunk.Error)); !reflect.DeepEqual(g, required) {
		t.Errorf("chat cut error keys %v, want the schema's required %v", g, required)
	}
}

// TestEstimator reads the providers' requests: max_tokens (Chat Completions, Anthropic),
// max_completion_tokens, max_output_tokens (Responses), the default when none is stated, the
// prompt at 4 bytes a token (or as configured).
func TestEstimator(t *testing.T) {
	e := budget.Estimator{}
	for _, c := range []struct {
		body     string
		in, out  int64
		model    string
		streamed bool
	}{
		{`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hi"}],"max_tokens":100}`, 9, 100, "gpt-4o", false},
		{`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hi"}],"max_completion_tokens":50,"stream":true}`, 9, 50, "gpt-4o", true},
		{`{"model":"gpt-5.4","input":"Tell me a three sentence bedtime story about a unicorn.","max_output_tokens":300}`, 15, 300, "gpt-5.4", false},
		{`{"model":"claude","system":"be brief","messages":[],"max_tokens":1024}`, 3, 1024, "claude", false},
		{`{"model":"m","prompt":"x"}`, 1, 4096, "m", false},
	} {
		got, err := e.Request([]byte(c.body))
		if err != nil || got.InputTokens != c.in || got.OutputTokens != c.out || got.Model != c.model || got.Stream != c.streamed {
			t.Errorf("%s: %+v %v, want in %d out %d", c.body, got, err, c.in, c.out)
		}
	}
	bound := budget.Estimator{BytesPerToken: 1, DefaultOutput: 10, MaxOutput: 64}
	if got, _ := bound.Request([]byte(`{"input":"abcd","max_output_tokens":1000}`)); got.InputTokens != 6 || got.OutputTokens != 64 {
		t.Errorf("one byte a token, output capped at 64: %+v", got)
	}
	// bad input: an error naming the field (or the byte where JSON stops), never the request's
	// values
	for _, c := range []struct{ body, want string }{
		{`[1]`, "body: want a JSON object"},
		{`{"max_tokens":-1}`, "max_tokens: negative"},
		{`{"max_tokens":"secret-sk-1"}`, "max_tokens: want a whole number, got a JSON string"},
		{`{"max_output_tokens":1.5}`, "max_output_tokens: want a whole number, got a JSON number"},
		{`{"model":"m", secret-sk-1}`, "body: not JSON (at byte 15)"},
	} {
		_, err := e.Request([]byte(c.body))
		if !errors.Is(err, budget.ErrBadRequest) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "1.5") {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
}
