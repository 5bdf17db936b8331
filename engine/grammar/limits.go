package grammar

import "fmt"

// Bounds on what one grammar may cost, since grammars and schemas come from requests.
const (
	// MaxSchemaDepth bounds the nesting of a JSON schema FromJSONSchema converts.
	MaxSchemaDepth = 64
	// MaxSchemaGrammarBytes bounds the grammar text FromJSONSchema builds.
	MaxSchemaGrammarBytes = 512 << 10
	// MaxGrammarElements bounds the elements of a parsed grammar, repetitions expanded (a
	// grammar's text makes about an element per character).
	MaxGrammarElements = 1 << 20
)

var errGrammarTooLarge = fmt.Errorf("grammar: the schema's grammar is larger than %d bytes", MaxSchemaGrammarBytes)

// expand accounts for n more elements made at off (or their equivalent in the rules a
// repetition generates), failing once the grammar passes MaxGrammarElements. Every element
// counts, not only repetitions' copies, so that a long grammar text fails as soon as it is
// too large instead of after it is all parsed.
func (p *parser) expand(off, n int) {
	if p.size += n; p.size > MaxGrammarElements {
		p.fail(off, fmt.Sprintf("the grammar expands to more than %d elements (repetitions {m,n} are expanded into copies)", MaxGrammarElements))
	}
}
