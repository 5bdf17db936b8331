package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	goerrors "github.com/go-faster/errors"
	"github.com/ogen-go/ogen/ogenerrors"
	"github.com/ogen-go/ogen/validate"

	"github.com/wgpu-llama/wgpu-llama/gen"
)

// decodeError is ogen's error handler for requests that fail before a handler runs: unreadable
// or malformed bodies, wrong field types and failed schema constraints.
//
// llama-server answers 500 server_error with the JSON library's message for a body that does
// not parse; we answer 400 invalid_request_error naming the problem (and the field, when one is
// at fault), since the client, not the server, has to fix it.
func (s *Server) decodeError(ctx context.Context, w http.ResponseWriter, _ *http.Request, err error) {
	ae := decodeFailure(err)
	s.noteError(ctx, ae)
	writeError(w, ae)
}

// requestTypes maps operations to their request body types, to name the type a field expects.
var requestTypes = map[string]reflect.Type{
	string(gen.CreateCompletionOperation):                reflect.TypeFor[gen.CompletionRequest](),
	string(gen.CreateCompletionAliasOperation):           reflect.TypeFor[gen.CompletionRequest](),
	string(gen.CreateChatCompletionOperation):            reflect.TypeFor[gen.ChatCompletionRequest](),
	string(gen.CreateChatCompletionAliasOperation):       reflect.TypeFor[gen.ChatCompletionRequest](),
	string(gen.CreateChatCompletionOllamaAliasOperation): reflect.TypeFor[gen.ChatCompletionRequest](),
	string(gen.ApplyTemplateOperation):                   reflect.TypeFor[gen.ApplyTemplateRequest](),
	string(gen.TokenizeOperation):                        reflect.TypeFor[gen.TokenizeRequest](),
	string(gen.DetokenizeOperation):                      reflect.TypeFor[gen.DetokenizeRequest](),
	string(gen.CreateEmbeddingOperation):                 reflect.TypeFor[gen.EmbeddingRequest](),
	string(gen.CreateEmbeddingNativeOperation):           reflect.TypeFor[gen.EmbeddingRequest](),
	string(gen.CreateEmbeddingNativeAliasOperation):      reflect.TypeFor[gen.EmbeddingRequest](),
	string(gen.RerankOperation):                          reflect.TypeFor[gen.RerankRequest](),
	string(gen.RerankV1AliasOperation):                   reflect.TypeFor[gen.RerankRequest](),
	string(gen.RerankAliasOperation):                     reflect.TypeFor[gen.RerankRequest](),
	string(gen.RerankingAliasOperation):                  reflect.TypeFor[gen.RerankRequest](),
	string(gen.LookupStreamsOperation):                   reflect.TypeFor[gen.StreamLookupRequest](),
	string(gen.CreateOAICompletionOperation):             reflect.TypeFor[gen.CompletionRequest](),
	string(gen.CreateInfillOperation):                    reflect.TypeFor[gen.InfillRequest](),
	string(gen.CreateAnthropicMessageOperation):          reflect.TypeFor[gen.AnthropicMessagesRequest](),
	string(gen.CountAnthropicTokensOperation):            reflect.TypeFor[gen.AnthropicMessagesRequest](),
}

// decodeFailure turns an ogen decode or validation error into a client-facing error.
func decodeFailure(err error) *apiError {
	var (
		tooBig *http.MaxBytesError
		verr   *validate.Error
		body   *ogenerrors.DecodeBodyError
		ctErr  *validate.InvalidContentTypeError
		reqErr *ogenerrors.DecodeRequestError
		param  *ogenerrors.DecodeParamError
	)
	var reqType reflect.Type
	if errors.As(err, &reqErr) {
		reqType = requestTypes[reqErr.OperationName()]
	}
	switch {
	case errors.As(err, &tooBig):
		return &apiError{typ: errRequestTooLarge, cause: err,
			message: fmt.Sprintf("request body too large: the limit is %d bytes", tooBig.Limit)}
	case errors.Is(err, validate.ErrBodyRequired):
		return &apiError{typ: errInvalidRequest, cause: err, message: "the request body is empty; expected a JSON object"}
	case errors.As(err, &ctErr):
		return &apiError{typ: errInvalidRequest, cause: err, message: "unsupported Content-Type " + ctErr.ContentType}
	case errors.As(err, &body):
		return &apiError{typ: errInvalidRequest, cause: err, message: describeDecode(body.Err, reqType)}
	case errors.As(err, &verr):
		return &apiError{typ: errInvalidRequest, cause: err, message: clip(describeValidation(verr, ""))}
	case errors.As(err, &param):
		return &apiError{typ: errInvalidRequest, cause: err, message: describeParam(param)}
	}
	return &apiError{typ: errInvalidRequest, cause: err, message: clip("invalid request: " + err.Error())}
}

// describeDecode explains a JSON decoding failure, naming the field and the type it expects
// when a field is at fault: "'max_tokens' must be an integer", "invalid JSON: unexpected EOF".
//
// The chain is as deep as the value that failed, and each layer's Error() spells out all the
// layers below it, so the walk reads each layer's own message (layerMessage) instead: linear in
// the chain, and the description is cut to maxErrorDetail.
func describeDecode(err error, reqType reflect.Type) string {
	var path []string
	var detail error
	for e := err; e != nil; e = errors.Unwrap(e) {
		if verr, ok := e.(*validate.Error); ok {
			return clip(describeValidation(verr, strings.Join(path, ".")))
		}
		msg, ok := layerMessage(e)
		if !ok {
			break
		}
		if name, ok := strings.CutPrefix(msg, "decode field "); ok {
			path = append(path, strings.Trim(name, `"`))
			detail = errors.Unwrap(e)
		}
	}
	if len(path) == 0 {
		var msgs []string
		for e := err; e != nil; e = errors.Unwrap(e) {
			msg, ok := layerMessage(e)
			if !ok {
				msgs = append(msgs, clip(e.Error()))
				break
			}
			if !strings.HasPrefix(msg, "decode ") { // drop ogen's "decode CompletionRequest"
				msgs = append(msgs, msg)
			}
			if len(msgs) > 16 {
				break
			}
		}
		return clip("invalid JSON: " + strings.Join(msgs, ": "))
	}
	field := strings.Join(path, ".")
	if want := expectedType(reqType, path); want != "" {
		return clip(fmt.Sprintf("'%s' must be %s", field, want))
	}
	return clip(fmt.Sprintf("invalid '%s': %s", field, clip(detail.Error())))
}

// layerMessage is e's own message, without the errors it wraps: go-faster/errors' wrappers
// (which ogen and jx use) print it through FormatError; an error that wraps nothing is its
// message. ok is false for other wrappers, whose own part cannot be told apart cheaply.
func layerMessage(e error) (msg string, ok bool) {
	if f, isFormatter := e.(ogenFormatter); isFormatter {
		var p layerPrinter
		f.FormatError(&p)
		return p.String(), true
	}
	if errors.Unwrap(e) == nil {
		return e.Error(), true
	}
	return "", false
}

// ogenFormatter is go-faster/errors' Formatter.
type ogenFormatter interface {
	FormatError(p goerrors.Printer) (next error)
}

// layerPrinter collects what a FormatError prints, without details (stack frames).
type layerPrinter struct{ strings.Builder }

func (p *layerPrinter) Print(args ...any)                 { fmt.Fprint(&p.Builder, args...) }
func (p *layerPrinter) Printf(format string, args ...any) { fmt.Fprintf(&p.Builder, format, args...) }
func (p *layerPrinter) Detail() bool                      { return false }

// clip cuts a description to maxErrorDetail bytes, at a rune boundary.
func clip(msg string) string {
	if len(msg) <= maxErrorDetail {
		return msg
	}
	cut := maxErrorDetail - len("...")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// describeValidation explains failed schema constraints; prefix is the path of the object that
// holds the fields, "" at the top level.
func describeValidation(verr *validate.Error, prefix string) string {
	msgs := make([]string, 0, len(verr.Fields))
	for _, f := range verr.Fields {
		name := f.Name
		if prefix != "" && !strings.HasPrefix(name, "[") { // array items are named "[i]"
			name = prefix + "." + name
		} else {
			name = prefix + name
		}
		var nested *validate.Error
		switch {
		case errors.Is(f.Error, validate.ErrFieldRequired):
			msgs = append(msgs, fmt.Sprintf("'%s' is required", name))
			continue
		case errors.As(f.Error, &nested): // the items of an array
			msgs = append(msgs, describeValidation(nested, name))
			continue
		}
		msgs = append(msgs, fmt.Sprintf("'%s' %s", name, describeLimit(f.Error)))
	}
	return strings.Join(msgs, "; ")
}

// describeParam explains a header, path or query parameter that failed to parse or validate:
// "'from' (query) must be an integer", "'id' (path) must match ^[A-Za-z0-9_-]{1,128}$".
func describeParam(p *ogenerrors.DecodeParamError) string {
	var num *strconv.NumError
	name := fmt.Sprintf("'%s' (%s)", p.Name, p.In)
	if errors.As(p.Err, &num) {
		return name + " must be an integer"
	}
	return name + " " + describeLimit(p.Err)
}

// describeLimit rewords ogen's "int: value -2 less than -1" as "must be at least -1 (got -2)"
// and its "no regex match: P" as "must match P".
func describeLimit(err error) string {
	var pattern *validate.NoRegexMatchError
	if errors.As(err, &pattern) {
		return "must match " + pattern.Pattern.String()
	}
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "value "); ok {
		for sep, bound := range map[string]string{" less than ": "at least", " greater than ": "at most"} {
			got, limit, ok := strings.Cut(rest, sep)
			if !ok {
				continue
			}
			g, err1 := strconv.ParseFloat(got, 64)
			l, err2 := strconv.ParseFloat(limit, 64)
			if err1 == nil && err2 == nil {
				return fmt.Sprintf("must be %s %v (got %v)", bound, l, g)
			}
		}
	}
	return "is invalid: " + msg
}

// sumTypes describes the generated oneOf types, which reflection cannot name.
var sumTypes = map[reflect.Type]string{
	reflect.TypeFor[gen.Stop]():               "a string or an array of strings",
	reflect.TypeFor[gen.Prompt]():             "a string or an array of token ids and strings (or of prompts)",
	reflect.TypeFor[gen.PromptElement]():      "a token id, a string or an array of token ids and strings",
	reflect.TypeFor[gen.PromptPiece]():        "a token id or a string",
	reflect.TypeFor[gen.InfillText]():         "a string or an array of token ids and strings",
	reflect.TypeFor[gen.AnthropicSystem]():    "a string or an array of text blocks",
	reflect.TypeFor[gen.AnthropicContent]():   "a string or an array of content blocks",
	reflect.TypeFor[gen.ChatMessageContent](): "a string or an array of content parts",
	reflect.TypeFor[gen.TokenizeContent]():    "a string or an array of token ids and strings",
	reflect.TypeFor[gen.EmbeddingInput]():     "a string, or an array of strings, token ids and arrays of them",
	reflect.TypeFor[gen.EmbeddingInputItem](): "a string, a token id, or an array of token ids and strings",
}

// expectedType names the JSON type of the field at path in the generated request type t, or ""
// when the path cannot be followed.
func expectedType(t reflect.Type, path []string) string {
	if t == nil {
		return ""
	}
	for _, key := range path {
		t = fieldType(unwrap(t), key)
		if t == nil {
			return ""
		}
	}
	return describeType(t)
}

// unwrap strips ogen's Opt/OptNil wrappers and slices down to the element type.
func unwrap(t reflect.Type) reflect.Type {
	for {
		switch {
		case t.Kind() == reflect.Slice:
			t = t.Elem()
		case t.Kind() == reflect.Struct && isOptional(t):
			f, _ := t.FieldByName("Value")
			t = f.Type
		default:
			return t
		}
	}
}

func isOptional(t reflect.Type) bool {
	_, hasSet := t.FieldByName("Set")
	_, hasValue := t.FieldByName("Value")
	return hasSet && hasValue && strings.HasPrefix(t.Name(), "Opt")
}

// fieldType finds the field with JSON name key in struct t, looking inside the variants of
// sum types.
func fieldType(t reflect.Type, key string) reflect.Type {
	if t.Kind() != reflect.Struct {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == key {
			return f.Type
		}
	}
	if _, isSum := sumTypes[t]; isSum {
		for i := range t.NumField() {
			if ft := fieldType(unwrap(t.Field(i).Type), key); ft != nil {
				return ft
			}
		}
	}
	return nil
}

func describeType(t reflect.Type) string {
	nullable := false
	if t.Kind() == reflect.Struct && isOptional(t) {
		_, nullable = t.FieldByName("Null")
		f, _ := t.FieldByName("Value")
		t = f.Type
	}
	var what string
	if d, ok := sumTypes[t]; ok {
		what = d
	} else {
		switch t.Kind() {
		case reflect.Int, reflect.Int32, reflect.Int64:
			what = "an integer"
		case reflect.Float32, reflect.Float64:
			what = "a number"
		case reflect.Bool:
			what = "a boolean"
		case reflect.String:
			what = "a string"
		case reflect.Slice:
			what = "an array"
			if of := elementsOf(t.Elem()); of != "" {
				what += " of " + of
			}
		case reflect.Struct, reflect.Map:
			what = "an object"
		default:
			return ""
		}
	}
	if nullable {
		what += " (or null)"
	}
	return what
}

// elementsOf names an array's elements in the plural ("integers"), or "" for elements with no
// short name (sum types, free-form values).
func elementsOf(t reflect.Type) string {
	if _, isSum := sumTypes[t]; isSum {
		return ""
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integers"
	case reflect.Float32, reflect.Float64:
		return "numbers"
	case reflect.Bool:
		return "booleans"
	case reflect.String:
		return "strings"
	case reflect.Struct, reflect.Map:
		return "objects"
	}
	return ""
}
