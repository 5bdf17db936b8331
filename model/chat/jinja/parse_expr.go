package jinja

import "strconv"

// parseTuple parses an expression or a bare comma-separated tuple (as in "set a = 1, 2").
func (p *parser) parseTuple() (expr, error) {
	x, err := p.parseExpr()
	if err != nil || !p.isOp(",") {
		return x, err
	}
	items := []expr{x}
	for p.isOp(",") {
		p.i++
		y, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, y)
	}
	return &listExpr{items}, nil
}

// parseExpr parses a full expression, including "a if cond else b".
func (p *parser) parseExpr() (expr, error) {
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		p.i++
		c, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var b expr = &literal{Undefined{}}
		if p.isName("else") {
			p.i++
			if b, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		x = &condExpr{c, x, b}
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	x, err := p.parseAnd()
	for err == nil && p.isName("or") {
		p.i++
		var y expr
		y, err = p.parseAnd()
		x = &binaryExpr{"or", x, y}
	}
	return x, err
}

func (p *parser) parseAnd() (expr, error) {
	x, err := p.parseNot()
	for err == nil && p.isName("and") {
		p.i++
		var y expr
		y, err = p.parseNot()
		x = &binaryExpr{"and", x, y}
	}
	return x, err
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		p.i++
		x, err := p.parseNot()
		return &unaryExpr{"not", x}, err
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	x, err := p.parseBinary(0)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
			p.i++
		case p.isName("in"):
			op = "in"
			p.i++
		case p.isName("not") && p.toks[p.i+1].kind == tokName && p.toks[p.i+1].val == "in":
			op = "not in"
			p.i += 2
		default:
			return x, nil
		}
		y, err := p.parseBinary(0)
		if err != nil {
			return nil, err
		}
		x = &binaryExpr{op, x, y}
	}
}

// binaryLevels are the arithmetic operators from loosest to tightest, as Jinja2 orders them.
var binaryLevels = [][]string{{"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}}

func (p *parser) parseBinary(level int) (expr, error) {
	if level == len(binaryLevels) {
		return p.parseUnary()
	}
	x, err := p.parseBinary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		matched := false
		if t.kind == tokOp {
			for _, op := range binaryLevels[level] {
				if t.val == op {
					matched = true
				}
			}
		}
		if !matched {
			return x, nil
		}
		p.i++
		y, err := p.parseBinary(level + 1)
		if err != nil {
			return nil, err
		}
		x = &binaryExpr{t.val, x, y}
	}
}

func (p *parser) parseUnary() (expr, error) {
	if p.isOp("-") || p.isOp("+") {
		op := p.next().val
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op, x}, nil
	}
	x, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	return p.parsePostfix(x)
}

// parsePostfix parses attribute access, subscripts, calls, filters and tests after x.
func (p *parser) parsePostfix(x expr) (expr, error) {
	var err error
	for {
		t := p.peek()
		switch {
		case t.kind == tokOp && t.val == ".":
			p.i++
			n := p.next()
			if n.kind != tokName && n.kind != tokInt {
				return nil, errorAt(p.src, n.pos, "expected an attribute name")
			}
			if n.kind == tokInt {
				v, _ := strconv.ParseInt(n.val, 10, 64)
				x = &indexExpr{x, &literal{v}}
			} else {
				x = &attrExpr{x, n.val}
			}
		case t.kind == tokOp && t.val == "[":
			p.i++
			if x, err = p.parseSubscript(x); err != nil {
				return nil, err
			}
		case t.kind == tokOp && t.val == "(":
			p.i++
			args, kwargs, err := p.parseArgs()
			if err != nil {
				return nil, err
			}
			x = &callExpr{x, args, kwargs, t.pos}
		case t.kind == tokOp && t.val == "|":
			p.i++
			if x, err = p.parseFilterCall(x); err != nil {
				return nil, err
			}
		case t.kind == tokName && t.val == "is":
			p.i++
			te := &testExpr{obj: x}
			if p.isName("not") {
				p.i++
				te.negate = true
			}
			if te.name, err = p.expectName(); err != nil {
				return nil, err
			}
			if p.isOp("(") {
				p.i++
				if te.args, _, err = p.parseArgs(); err != nil {
					return nil, err
				}
			} else if a := p.peek(); a.kind == tokString || a.kind == tokInt || a.kind == tokFloat ||
				a.kind == tokName && !keyword(a.val) {
				arg, err := p.parsePrimary()
				if err != nil {
					return nil, err
				}
				te.args = []expr{arg}
			}
			x = te
		default:
			return x, nil
		}
	}
}

// keyword reports names that end an expression rather than start one.
func keyword(s string) bool {
	switch s {
	case "and", "or", "not", "in", "is", "if", "else", "elif", "recursive":
		return true
	}
	return false
}

// parseFilterCall parses "name" or "name(args)" after a "|" (or in a filter block).
func (p *parser) parseFilterCall(obj expr) (*filterExpr, error) {
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	f := &filterExpr{obj: obj, name: name}
	if p.isOp("(") {
		p.i++
		if f.args, f.kwargs, err = p.parseArgs(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// parseSubscript parses what follows "[": an index or a slice.
func (p *parser) parseSubscript(obj expr) (expr, error) {
	var parts [3]expr
	n := 0
	isSlice := false
	for {
		if p.isOp("]") {
			p.i++
			break
		}
		if p.isOp(":") {
			p.i++
			isSlice = true
			n++
			if n > 2 {
				return nil, p.errorf("too many ':' in slice")
			}
			continue
		}
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		parts[n] = x
	}
	if !isSlice {
		return &indexExpr{obj, parts[0]}, nil
	}
	return &sliceExpr{obj, parts[0], parts[1], parts[2]}, nil
}

// parseArgs parses call arguments after "(" through ")".
func (p *parser) parseArgs() ([]expr, []kwarg, error) {
	var args []expr
	var kwargs []kwarg
	for !p.isOp(")") {
		if p.peek().kind == tokName && p.toks[p.i+1].kind == tokOp && p.toks[p.i+1].val == "=" {
			name := p.next().val
			p.i++
			x, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name, x})
		} else {
			x, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, x)
		}
		if p.isOp(",") {
			p.i++
		} else if !p.isOp(")") {
			return nil, nil, p.errorf("expected ',' or ')', got %q", p.peek().val)
		}
	}
	p.i++
	return args, kwargs, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokString:
		s := t.val
		for p.peek().kind == tokString {
			s += p.next().val
		}
		return &literal{s}, nil
	case tokInt:
		v, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, errorAt(p.src, t.pos, err.Error())
		}
		return &literal{v}, nil
	case tokFloat:
		v, err := strconv.ParseFloat(t.val, 64)
		if err != nil {
			return nil, errorAt(p.src, t.pos, err.Error())
		}
		return &literal{v}, nil
	case tokName:
		switch t.val {
		case "true", "True":
			return &literal{true}, nil
		case "false", "False":
			return &literal{false}, nil
		case "none", "None":
			return &literal{nil}, nil
		}
		return &nameExpr{t.val, t.pos}, nil
	case tokOp:
		switch t.val {
		case "(":
			if p.isOp(")") {
				p.i++
				return &listExpr{}, nil
			}
			x, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{x}
				for p.isOp(",") {
					p.i++
					if p.isOp(")") {
						break
					}
					y, err := p.parseExpr()
					if err != nil {
						return nil, err
					}
					items = append(items, y)
				}
				x = &listExpr{items}
			}
			return x, p.expectOp(")")
		case "[":
			l := &listExpr{}
			for !p.isOp("]") {
				x, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
				if p.isOp(",") {
					p.i++
				} else if !p.isOp("]") {
					return nil, p.errorf("expected ',' or ']'")
				}
			}
			p.i++
			return l, nil
		case "{":
			d := &dictExpr{}
			for !p.isOp("}") {
				k, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
				if p.isOp(",") {
					p.i++
				} else if !p.isOp("}") {
					return nil, p.errorf("expected ',' or '}'")
				}
			}
			p.i++
			return d, nil
		}
	}
	return nil, errorAt(p.src, t.pos, "unexpected "+strconv.Quote(t.val))
}
