package server

// Parsing of the structured sampling fields: the output constraint (grammar, JSON schema,
// response_format), logit_bias and the sampler chain.

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
)

// constraint compiles the output constraint, as llama-server accepts it: a GBNF grammar, or
// a JSON schema (json_schema, or chat's response_format) converted to one. At most one.
func (f samplingFields) constraint(p *engine.Params) error {
	schema, field, err := f.schema()
	if err != nil {
		return err
	}
	src, hasGrammar := f.grammar.Get()
	hasGrammar = hasGrammar && src != ""
	if !isNull(schema) {
		if hasGrammar {
			return invalidRequest("either %s or 'grammar' can be given, but not both", quoteField(field))
		}
		var err error
		if src, err = grammar.FromJSONSchema(schema); err != nil {
			return invalidRequest("%s: %v", quoteField(field), err)
		}
	} else if !hasGrammar {
		return nil
	}
	g, err := grammar.Parse(src)
	if err != nil {
		return invalidRequest("'grammar': %v", err)
	}
	p.Grammar = g
	return nil
}

// schema is the JSON schema that constrains the output (json_schema, or chat's
// response_format), nil when there is none, and the field it came from.
func (f samplingFields) schema() (jx.Raw, string, error) {
	schema, field := f.jsonSchema, "json_schema"
	if !isNull(f.responseFormat) {
		s, err := responseFormatSchema(f.responseFormat)
		if err != nil {
			return nil, "", err
		}
		if s != nil {
			schema, field = s, "response_format"
		}
	}
	if isNull(schema) {
		return nil, field, nil
	}
	return schema, field, nil
}

func quoteField(name string) string { return "'" + name + "'" }

// responseFormatSchema reads OpenAI's response_format: {"type": "text"} constrains nothing;
// "json_object" any object (or the "schema" given); "json_schema" its json_schema.schema.
func responseFormatSchema(raw jx.Raw) (jx.Raw, error) {
	var rf struct {
		Type       string          `json:"type"`
		Schema     json.RawMessage `json:"schema"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, invalidRequest("'response_format' must be an object with a 'type'")
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		if len(rf.Schema) > 0 {
			return jx.Raw(rf.Schema), nil
		}
		return jx.Raw(`{"type": "object"}`), nil
	case "json_schema":
		if rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
			return jx.Raw(rf.JSONSchema.Schema), nil
		}
		if len(rf.Schema) > 0 {
			return jx.Raw(rf.Schema), nil
		}
		return jx.Raw(`{}`), nil
	default:
		return nil, invalidRequest("'response_format' type must be \"text\", \"json_object\" or \"json_schema\" (got %q)", rf.Type)
	}
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw jx.Raw) bool { return len(raw) == 0 || raw.Type() == jx.Null }

// parseLogitBias reads llama-server's logit_bias: [[token, bias], ...] or {"token": bias}, where
// a token is an id or a string (all of whose tokens get the bias) and a bias of false bans.
func (f samplingFields) parseLogitBias() ([]engine.LogitBias, error) {
	raw := f.logitBias
	if isNull(raw) {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return invalidRequest("'logit_bias' "+format, args...)
	}
	out := []engine.LogitBias{}
	add := func(ids []int32, bias float32) {
		for _, id := range ids {
			out = append(out, engine.LogitBias{Token: id, Bias: bias})
		}
	}
	bias := func(d *jx.Decoder, tok string) (float32, error) {
		switch d.Next() {
		case jx.Number:
			v, err := d.Float64()
			if err != nil || !finite(v) {
				return 0, bad("%s: the bias must be a number or false", tok)
			}
			return float32(v), nil
		case jx.Bool:
			v, _ := d.Bool()
			if !v {
				return float32(math.Inf(-1)), nil
			}
		}
		return 0, bad("%s: the bias must be a number or false", tok)
	}
	// As llama-server, an id outside the vocabulary (0 <= id < n_vocab) is skipped.
	id := func(n int64) []int32 {
		if n < 0 || (f.tok != nil && n >= int64(f.tok.NVocab())) || n > math.MaxInt32 {
			return nil
		}
		return []int32{int32(n)}
	}
	text := func(s string) []int32 {
		if f.tok == nil {
			return nil
		}
		return f.tok.Encode(s, false, false)
	}
	d := jx.DecodeBytes(raw)
	switch raw.Type() {
	case jx.Array:
		i := 0
		err := d.Arr(func(d *jx.Decoder) error {
			defer func() { i++ }()
			pair, err := d.Raw()
			if err != nil || pair.Type() != jx.Array {
				return bad("entry %d must be a [token, bias] pair", i)
			}
			var elems []jx.Raw
			if err := jx.DecodeBytes(pair).Arr(func(d *jx.Decoder) error {
				r, err := d.Raw()
				elems = append(elems, r)
				return err
			}); err != nil || len(elems) != 2 {
				return bad("entry %d must be a [token, bias] pair", i)
			}
			var ids []int32
			switch elems[0].Type() {
			case jx.Number:
				n, err := jx.DecodeBytes(elems[0]).Int64()
				switch {
				case err == nil:
					ids = id(n)
				case !integerLiteral(elems[0]): // 1.5, 1e3: not an id
					return bad("entry %d: the token must be an integer id or a string", i)
				} // else an integer beyond int64: out of range, skipped
			case jx.String:
				s, _ := jx.DecodeBytes(elems[0]).Str()
				ids = text(s)
			default:
				return bad("entry %d: the token must be an integer id or a string", i)
			}
			b, err := bias(jx.DecodeBytes(elems[1]), "entry "+strconv.Itoa(i))
			if err != nil {
				return err
			}
			add(ids, b)
			return nil
		})
		if err != nil {
			// jx wraps what the callback returns: the specific message is inside.
			var ae *apiError
			if errors.As(err, &ae) {
				return nil, ae
			}
			return nil, bad("must be an array of [token, bias] pairs or an object")
		}
	case jx.Object:
		err := d.Obj(func(d *jx.Decoder, key string) error {
			var ids []int32
			// A numeric key is an id (one beyond int64 is out of range); any other is text.
			if n, err := strconv.ParseInt(key, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
				ids = id(n)
			} else {
				ids = text(key)
			}
			b, err := bias(d, "token "+strconv.Quote(key))
			if err != nil {
				return err
			}
			add(ids, b)
			return nil
		})
		if err != nil {
			// jx wraps what the callback returns: the specific message is inside.
			var ae *apiError
			if errors.As(err, &ae) {
				return nil, ae
			}
			return nil, bad("must be an array of [token, bias] pairs or an object")
		}
	default:
		return nil, bad("must be an array of [token, bias] pairs or an object")
	}
	return out, nil
}

// integerLiteral reports whether raw is a JSON number written as an integer (digits, maybe a
// minus sign), however large.
func integerLiteral(raw jx.Raw) bool {
	digits := strings.TrimPrefix(string(raw), "-")
	return digits != "" && strings.Trim(digits, "0123456789") == ""
}

// parseSamplers reads samplers: an array of names (canonical or alternative spellings) or a
// string of one-letter names. nil means the field is absent (the default chain).
func parseSamplers(raw jx.Raw) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	d := jx.DecodeBytes(raw)
	out := []string{}
	switch raw.Type() {
	case jx.String:
		s, err := d.Str()
		if err != nil {
			return nil, invalidRequest("'samplers' must be an array of names or a string of letters")
		}
		for _, r := range s {
			n := engine.SamplersFromChars(string(r))
			if len(n) == 0 {
				return nil, invalidRequest("'samplers' has an unknown sampler letter %q", r)
			}
			out = append(out, n...)
		}
	case jx.Array:
		err := d.Arr(func(d *jx.Decoder) error {
			if d.Next() != jx.String {
				return invalidRequest("'samplers' must be an array of names or a string of letters")
			}
			name, err := d.Str()
			if err != nil {
				return err
			}
			c, ok := engine.CanonicalSamplerName(name, true)
			if !ok {
				return invalidRequest("'samplers' has an unknown sampler %q", name)
			}
			out = append(out, c)
			return nil
		})
		if err != nil {
			var ae *apiError
			if errors.As(err, &ae) {
				return nil, ae
			}
			return nil, invalidRequest("'samplers' must be an array of names or a string of letters")
		}
	default:
		return nil, invalidRequest("'samplers' must be an array of names or a string of letters")
	}
	return out, nil
}
