package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	goerrors "github.com/go-faster/errors"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
)

// TestDeepJSONRejected: a body nested deeper than maxJSONDepth is refused before decoding,
// with a message naming the limit and where it was passed, wherever the nesting is.
func TestDeepJSONRejected(t *testing.T) {
	h := newHarness(t)
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	for _, body := range []string{
		deep,
		`{"prompt":"hi","json_schema":` + deep + `}`,
		`{"prompt":` + deep + `}`,
		`{"unknown_field":` + strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000) + `}`,
	} {
		rec := h.do(t, "POST", "/completion", body)
		wantError(t, rec, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("nested deeper than %d levels", maxJSONDepth))
	}
	// Stray closers first do not buy deeper nesting after them.
	stray := strings.Repeat("]", 1000) + strings.Repeat("[", maxJSONDepth+1)
	if ae := jsonTextProblem([]byte(stray)); ae == nil || !strings.Contains(ae.message, "nested deeper") {
		t.Errorf("nesting after stray closers: %v", ae)
	}
	// Brackets inside strings are text, not nesting.
	rec := h.do(t, "POST", "/tokenize", `{"content":"`+strings.Repeat("[{", 5000)+`"}`)
	if rec.Code != http.StatusOK {
		t.Errorf("brackets in a string: status %d: %.200s", rec.Code, rec.Body)
	}
}

// TestHugeBodiesAnswered: 32 MiB bodies of the shapes that are expensive to describe get a
// short 400, however long the body or its error chain.
func TestHugeBodiesAnswered(t *testing.T) {
	h := newHarness(t)
	const size = 32<<20 - 64
	nested := `{"n_predict":` + strings.Repeat(`{"a":`, maxJSONDepth-2) + `"x"` + strings.Repeat("}", maxJSONDepth-2) + `}`
	for name, body := range map[string]string{
		"long string":       `{"prompt":"` + strings.Repeat("x", size) + ``,
		"long bad number":   `{"n_predict":` + strings.Repeat("9", size) + `}`,
		"wide array":        `{"prompt":"a","stop":[` + strings.Repeat(`"a",`, maxJSONItems/2) + `1]}`,
		"nested wrong type": nested,
		"garbage":           strings.Repeat("\x01", size),
	} {
		rec := h.do(t, "POST", "/completion", body)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d", name, rec.Code)
		}
		if rec.Body.Len() > 2*maxErrorDetail {
			t.Errorf("%s: error body is %d bytes: %.300s", name, rec.Body.Len(), rec.Body)
		}
		if !validJSONText(rec.Body.Bytes()) {
			t.Errorf("%s: error body is not JSON: %.300s", name, rec.Body)
		}
	}
}

// TestWideBodiesRefused: a body with more than maxJSONItems elements and members, which the
// decoders would turn into a gigabyte of values, is refused before decoding with a 413 saying
// so; one under the limit is decoded and answered as usual.
func TestWideBodiesRefused(t *testing.T) {
	h := newHarness(t)
	const size = 32<<20 - 64
	for name, body := range map[string]string{
		"token prompt": `{"prompt":[` + strings.Repeat("5,", size/2) + `5],"n_predict":1}`,
		"stop strings": `{"prompt":"a","n_predict":1,"stop":[` + strings.Repeat(`"a",`, size/4) + `"b"]}`,
		"members":      `{` + strings.Repeat(`"k":1,`, size/6) + `"prompt":"a"}`,
	} {
		rec := h.do(t, "POST", "/completion", body)
		wantError(t, rec, http.StatusRequestEntityTooLarge, "request_too_large",
			fmt.Sprintf("request body too large: more than %d array elements and object members", maxJSONItems))
		if t.Failed() {
			t.Fatalf("%s", name)
		}
	}
	rec := h.do(t, "POST", "/completion", `{"prompt":[`+strings.Repeat("5,", 100000)+`5],"n_predict":1}`)
	wantError(t, rec, http.StatusBadRequest, "exceed_context_size_error", "the prompt has 100001 tokens")
}

// TestDescribeDecodeBounded: describing a long decode error chain stays short.
func TestDescribeDecodeBounded(t *testing.T) {
	var err error = errors.New(strings.Repeat("z", 100000))
	for range 3000 { // as ogen's generated decoders wrap
		err = goerrors.Wrap(err, `decode field "a"`)
	}
	msg := describeDecode(err, nil)
	if len(msg) > maxErrorDetail {
		t.Errorf("description is %d bytes, want at most %d", len(msg), maxErrorDetail)
	}
	if !strings.HasPrefix(msg, "invalid 'a.a.a.a") {
		t.Errorf("description = %.200q", msg)
	}
}

// TestInvalidUTF8Rejected: raw invalid UTF-8 anywhere in a body is a 400 naming its offset,
// never copied into a response.
func TestInvalidUTF8Rejected(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ path, body string }{
		{"/apply-template", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\xfeb\"}]}"},
		{"/completion", "{\"prompt\":\"hi\",\"stop\":[\"\xc3\"],\"n_predict\":1}"},
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80\"}]}"},
		{"/tokenize", "{\"content\":\"ok\",\"x\x80\":1}"},
	} {
		rec := h.do(t, "POST", tc.path, tc.body)
		wantError(t, rec, http.StatusBadRequest, "invalid_request_error", "invalid UTF-8 at byte")
	}
	// Escaped lone surrogates decode to valid text: every answer stays valid JSON.
	for _, tc := range []struct{ path, body string }{
		{"/apply-template", `{"messages":[{"role":"user","content":"a\ud800b"}]}`},
		{"/completion", `{"prompt":"hi","stop":["\udc80"],"n_predict":1}`},
	} {
		rec := h.do(t, "POST", tc.path, tc.body)
		if !validJSONText(rec.Body.Bytes()) {
			t.Errorf("%s: response is not valid JSON: %q", tc.path, rec.Body)
		}
	}
}

// TestSchemaGrammarBounded: a request's json_schema may not build an unbounded grammar: a deep
// schema and one whose grammar expands past the limit get a 400 naming the limit, and what
// generation_settings echoes of a schema's grammar is bounded.
func TestSchemaGrammarBounded(t *testing.T) {
	h := newHarness(t)
	deep := strings.Repeat(`{"type":"array","items":`, 100) + `{"type":"string"}` + strings.Repeat("}", 100)
	rec := h.do(t, "POST", "/completion", `{"prompt":"x","n_predict":1,"json_schema":`+deep+`}`)
	wantError(t, rec, http.StatusBadRequest, "invalid_request_error",
		fmt.Sprintf("'json_schema': grammar: the schema nests deeper than %d levels", grammar.MaxSchemaDepth))

	var props, names []string
	for i := range 200 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string","maxLength":10000}`, i))
		names = append(names, fmt.Sprintf(`"p%d"`, i))
	}
	wide := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(names, ",") + `]}`
	rec = h.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":`+wide+`}}}`)
	wantError(t, rec, http.StatusBadRequest, "invalid_request_error",
		fmt.Sprintf("the grammar expands to more than %d elements", grammar.MaxGrammarElements))

	var enum []string
	for i := range 40000 {
		enum = append(enum, fmt.Sprintf(`"value number %d"`, i))
	}
	big := `{"enum":[` + strings.Join(enum, ",") + `]}`
	rec = h.do(t, "POST", "/completion", `{"prompt":"x","n_predict":1,"json_schema":`+big+`}`)
	wantError(t, rec, http.StatusBadRequest, "invalid_request_error",
		fmt.Sprintf("the schema's grammar is larger than %d bytes", grammar.MaxSchemaGrammarBytes))
}

// TestSchemaKeywordTypeIs400: a json_schema keyword of the wrong type is a 400 naming it.
func TestSchemaKeywordTypeIs400(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, "POST", "/completion", `{"prompt":"x","n_predict":1,"json_schema":{"type":123}}`)
	wantError(t, rec, http.StatusBadRequest, "invalid_request_error", `'json_schema': grammar: "type" must be a string or an array of strings, not 123`)
	rec = h.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object","schema":{"type":"object","properties":{"a":{}},"required":"a"}}}`)
	wantError(t, rec, http.StatusBadRequest, "invalid_request_error", `'response_format': grammar: "required" must be an array of strings, not "a"`)
}

// TestTokenPromptEchoIsText: a token-array prompt whose tokens do not join into UTF-8 (a lone
// byte token) is echoed with U+FFFD, so the answer stays valid JSON.
func TestTokenPromptEchoIsText(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(b)
	rec := httptest.NewRecorder()
	// Token 198 is stories260K's byte token <0xC3>, the first byte of a two-byte character.
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/completion", strings.NewReader(`{"prompt":[1,198],"n_predict":1,"temperature":0}`)))
	if !validJSONText(rec.Body.Bytes()) {
		t.Fatalf("the answer is not valid JSON: %q", rec.Body)
	}
	if got := lookup(t, decodeJSON(t, rec.Body.Bytes()), "prompt"); got != "<s>\uFFFD" {
		t.Errorf("prompt = %q, want the replacement character", got)
	}
	// The same prompt echoed in an OpenAI completion's __verbose.
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":[1,198],"max_tokens":1,"temperature":0,"verbose":true}`)))
	if !validJSONText(rec.Body.Bytes()) {
		t.Fatalf("the verbose answer is not valid JSON: %q", rec.Body)
	}
	if got := lookup(t, decodeJSON(t, rec.Body.Bytes()), "__verbose.prompt"); got != "<s>\uFFFD" {
		t.Errorf("__verbose.prompt = %q, want the replacement character", got)
	}
}

// validJSONText reports whether b is JSON and UTF-8 (json.Valid lets invalid UTF-8 through).
func validJSONText(b []byte) bool { return utf8.Valid(b) && json.Valid(b) }
