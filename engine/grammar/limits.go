package grammar

import "fmt"

// Bounds on what one grammar may cost, since grammars and schemas come from requests.
const (
	// MaxSchemaDepth bounds the nesting of a JSON schema FromJSONSchema converts.
	MaxSchemaDepth = 64
	// MaxSchemaGrammarBytes bounds the grammar text FromJSONSchema builds.
	MaxSchemaGrammarBytes = 512 << 10
	// MaxGrammarElements bounds the elements of a parsed grammar, repetitions expanded.
	MaxGrammarElements = 1 << 20
)

var errGrammarTooLarge = fmt.Errorf("grammar: the schema's grammar is larger than %d bytes", MaxSchemaGrammarBytes)

// expand accounts for n more elements (or their equivalent in generated rule names) made by
// expanding a repetition at off, failing once the grammar passes MaxGrammarElements.
func (p *parser) expand(off, n int) {
	if p.size += n; p.size > MaxGrammarElements {
		p.fail(off, fmt.Sprintf("the grammar expands to more than %d elements (repetitions {m,n} are expanded into copies)", MaxGrammarElements))
	}
}
