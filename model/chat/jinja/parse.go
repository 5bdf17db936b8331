package jinja

import (
	"fmt"
	"strconv"
)

// node is a statement of a parsed template.
type node any

// expr is an expression of a parsed template.
type expr any

type (
	textNode   struct{ text string }
	outputNode struct{ x expr }
	ifNode     struct {
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		vars       []string
		iter, cond expr
		body, els  []node
	}
	setNode struct {
		names []string // plain targets, or one name when attr is set
		attr  string   // for "set ns.attr = ..."
		value expr     // nil for a block set
		body  []node
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr
		body     []node
	}
	breakNode    struct{}
	continueNode struct{}
	filterBlock  struct {
		f    *filterExpr
		body []node
	}
)

type (
	literal  struct{ v any }
	nameExpr struct {
		name string
		pos  int
	}
	attrExpr struct {
		obj  expr
		name string
	}
	indexExpr struct{ obj, idx expr }
	sliceExpr struct{ obj, start, stop, step expr }
	callExpr  struct {
		fn     expr
		args   []expr
		kwargs []kwarg
		pos    int
	}
	kwarg struct {
		name string
		x    expr
	}
	filterExpr struct {
		obj    expr // nil inside a filter block
		name   string
		args   []expr
		kwargs []kwarg
	}
	testExpr struct {
		obj    expr
		name   string
		args   []expr
		negate bool
	}
	unaryExpr struct {
		op string
		x  expr
	}
	binaryExpr struct {
		op   string
		l, r expr
	}
	condExpr struct{ cond, a, b expr }
	listExpr struct{ items []expr }
	dictExpr struct{ keys, vals []expr }
)

// parser turns tokens into a tree.
type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) errorf(format string, args ...any) error {
	return errorAt(p.src, p.peek().pos, fmt.Sprintf(format, args...))
}

// isOp reports whether the next token is operator op.
func (p *parser) isOp(op string) bool { t := p.peek(); return t.kind == tokOp && t.val == op }

// isName reports whether the next token is the name (keyword) n.
func (p *parser) isName(n string) bool { t := p.peek(); return t.kind == tokName && t.val == n }

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.errorf("expected %q, got %q", op, p.peek().val)
	}
	p.i++
	return nil
}

func (p *parser) expectName() (string, error) {
	if p.peek().kind != tokName {
		return "", p.errorf("expected a name, got %q", p.peek().val)
	}
	return p.next().val, nil
}

func (p *parser) expectKind(k tokKind) error {
	if p.peek().kind != k {
		return p.errorf("unexpected %q", p.peek().val)
	}
	p.i++
	return nil
}

// parseBody parses statements until a {% tag %} whose keyword is in stop (returned, with the
// parser left on that keyword) or the end of input when stop is empty.
func (p *parser) parseBody(stop ...string) ([]node, string, error) {
	var out []node
	for {
		t := p.peek()
		switch t.kind {
		case tokEOF:
			if len(stop) > 0 {
				return nil, "", p.errorf("unexpected end of template, expected %v", stop)
			}
			return out, "", nil
		case tokText:
			p.i++
			out = append(out, &textNode{t.val})
		case tokOpenExpr:
			p.i++
			x, err := p.parseExpr()
			if err != nil {
				return nil, "", err
			}
			if err := p.expectKind(tokCloseExpr); err != nil {
				return nil, "", err
			}
			out = append(out, &outputNode{x})
		case tokOpenStmt:
			kw := p.toks[p.i+1]
			for _, s := range stop {
				if kw.kind == tokName && kw.val == s {
					p.i += 2
					return out, s, nil
				}
			}
			p.i += 2
			n, err := p.parseStatement(kw)
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				out = append(out, n)
			}
		default:
			return nil, "", p.errorf("unexpected %q", t.val)
		}
	}
}

// endTag consumes the "%}" closing a statement.
func (p *parser) endTag() error { return p.expectKind(tokCloseStmt) }

func (p *parser) parseStatement(kw token) (node, error) {
	if kw.kind != tokName {
		return nil, errorAt(p.src, kw.pos, "expected a statement keyword")
	}
	switch kw.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "break", "continue":
		if err := p.endTag(); err != nil {
			return nil, err
		}
		if kw.val == "break" {
			return &breakNode{}, nil
		}
		return &continueNode{}, nil
	case "filter":
		f, err := p.parseFilterCall(nil)
		if err != nil {
			return nil, err
		}
		if err := p.endTag(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody("endfilter")
		if err != nil {
			return nil, err
		}
		return &filterBlock{f, body}, p.endTag()
	case "generation", "endgeneration":
		return nil, p.endTag()
	}
	return nil, errorAt(p.src, kw.pos, "unknown statement "+strconv.Quote(kw.val))
}

func (p *parser) parseIf() (node, error) {
	n := &ifNode{}
	for {
		c, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.endTag(); err != nil {
			return nil, err
		}
		body, end, err := p.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, c)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.endTag(); err != nil {
				return nil, err
			}
			if n.els, _, err = p.parseBody("endif"); err != nil {
				return nil, err
			}
		}
		return n, p.endTag()
	}
}

func (p *parser) parseFor() (node, error) {
	n := &forNode{}
	for {
		v, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.vars = append(n.vars, v)
		if !p.isOp(",") {
			break
		}
		p.i++
	}
	if !p.isName("in") {
		return nil, p.errorf("expected 'in'")
	}
	p.i++
	var err error
	if n.iter, err = p.parseOr(); err != nil { // no ternary: "if" here filters items
		return nil, err
	}
	if p.isName("if") {
		p.i++
		if n.cond, err = p.parseOr(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, p.errorf("recursive loops are not supported")
	}
	if err := p.endTag(); err != nil {
		return nil, err
	}
	body, end, err := p.parseBody("else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.endTag(); err != nil {
			return nil, err
		}
		if n.els, _, err = p.parseBody("endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.endTag()
}

func (p *parser) parseSet() (node, error) {
	n := &setNode{}
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n.names = []string{name}
	if p.isOp(".") {
		p.i++
		if n.attr, err = p.expectName(); err != nil {
			return nil, err
		}
	} else {
		for p.isOp(",") {
			p.i++
			v, err := p.expectName()
			if err != nil {
				return nil, err
			}
			n.names = append(n.names, v)
		}
	}
	if p.isOp("=") {
		p.i++
		if n.value, err = p.parseTuple(); err != nil {
			return nil, err
		}
		return n, p.endTag()
	}
	if err := p.endTag(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.parseBody("endset"); err != nil {
		return nil, err
	}
	return n, p.endTag()
}

func (p *parser) parseMacro() (node, error) {
	n := &macroNode{}
	var err error
	if n.name, err = p.expectName(); err != nil {
		return nil, err
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		arg, err := p.expectName()
		if err != nil {
			return nil, err
		}
		var def expr
		if p.isOp("=") {
			p.i++
			if def, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		n.params = append(n.params, arg)
		n.defaults = append(n.defaults, def)
		if p.isOp(",") {
			p.i++
		}
	}
	p.i++
	if err := p.endTag(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.parseBody("endmacro"); err != nil {
		return nil, err
	}
	if p.peek().kind == tokName { // {% endmacro name %}
		p.i++
	}
	return n, p.endTag()
}
