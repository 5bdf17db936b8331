package jinja

import (
	"errors"
	"fmt"
	"strings"
)

// Template is a parsed Jinja template.
type Template struct {
	src  string
	body []node
}

// Exception is the error raise_exception produces: the template rejected its input.
type Exception struct {
	Msg string // raise_exception's argument as a string; "" when called without one
}

// Error is the message as llama.cpp's minja words it.
func (e *Exception) Error() string { return "Jinja Exception: " + e.Msg }

// Parse parses src with the whitespace rules llama.cpp uses for chat templates.
func Parse(src string) (*Template, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	body, _, err := p.parseBody()
	if err != nil {
		return nil, err
	}
	return &Template{src: src, body: body}, nil
}

// Render executes the template with vars as its global variables (on top of the built-in
// globals) and returns the output.
func (t *Template) Render(vars *Dict) (string, error) {
	g := &scope{vars: map[string]any{}}
	for k, v := range globals {
		g.vars[k] = v
	}
	for _, k := range vars.Keys() {
		g.vars[k], _ = vars.Get(k)
	}
	r := &renderer{src: t.src}
	var b strings.Builder
	if err := r.run(t.body, &scope{vars: map[string]any{}, parent: g}, &b); err != nil {
		if errors.Is(err, errBreak) || errors.Is(err, errContinue) {
			return "", errors.New("break or continue outside a loop")
		}
		return "", err
	}
	return b.String(), nil
}

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// scope is one level of variables.
type scope struct {
	vars   map[string]any
	parent *scope
}

func (s *scope) lookup(name string) any {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v
		}
	}
	return Undefined{}
}

type renderer struct{ src string }

func (r *renderer) run(nodes []node, sc *scope, b *strings.Builder) error {
	for _, n := range nodes {
		if err := r.exec(n, sc, b); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) exec(n node, sc *scope, b *strings.Builder) error {
	switch n := n.(type) {
	case *textNode:
		b.WriteString(n.text)
	case *outputNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return err
		}
		b.WriteString(toStr(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c, sc)
			if err != nil {
				return err
			}
			if truthy(v) {
				return r.run(n.bodies[i], sc, b)
			}
		}
		return r.run(n.els, sc, b)
	case *forNode:
		return r.execFor(n, sc, b)
	case *setNode:
		var v any
		if n.value != nil {
			var err error
			if v, err = r.eval(n.value, sc); err != nil {
				return err
			}
		} else {
			var body strings.Builder
			if err := r.run(n.body, sc, &body); err != nil {
				return err
			}
			v = body.String()
		}
		if n.attr != "" {
			d, ok := sc.lookup(n.names[0]).(*Dict)
			if !ok {
				return fmt.Errorf("cannot assign attribute %q: %s is not a namespace", n.attr, n.names[0])
			}
			d.Set(n.attr, v)
			return nil
		}
		return assign(sc, n.names, v)
	case *macroNode:
		sc.vars[n.name] = r.macro(n, sc)
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	case *filterBlock:
		var body strings.Builder
		if err := r.run(n.body, sc, &body); err != nil {
			return err
		}
		v, err := r.applyFilter(n.f, body.String(), sc)
		if err != nil {
			return err
		}
		b.WriteString(toStr(v))
	}
	return nil
}

// assign binds names to v in sc, unpacking v when there are several names.
func assign(sc *scope, names []string, v any) error {
	if len(names) == 1 {
		sc.vars[names[0]] = v
		return nil
	}
	items, err := iterate(v)
	if err != nil {
		return err
	}
	if len(items) != len(names) {
		return fmt.Errorf("cannot unpack %d values into %d names", len(items), len(names))
	}
	for i, name := range names {
		sc.vars[name] = items[i]
	}
	return nil
}

func (r *renderer) execFor(n *forNode, sc *scope, b *strings.Builder) error {
	it, err := r.eval(n.iter, sc)
	if err != nil {
		return err
	}
	all, err := iterate(it)
	if err != nil {
		return err
	}
	items := all
	if n.cond != nil {
		items = nil
		for _, item := range all {
			inner := &scope{vars: map[string]any{}, parent: sc}
			if err := assign(inner, n.vars, item); err != nil {
				return err
			}
			v, err := r.eval(n.cond, inner)
			if err != nil {
				return err
			}
			if truthy(v) {
				items = append(items, item)
			}
		}
	}
	if len(items) == 0 {
		return r.run(n.els, sc, b)
	}
	for i, item := range items {
		inner := &scope{vars: map[string]any{}, parent: sc}
		if err := assign(inner, n.vars, item); err != nil {
			return err
		}
		inner.vars["loop"] = loopInfo(items, i)
		err := r.run(n.body, inner, b)
		if errors.Is(err, errBreak) {
			break
		}
		if err != nil && !errors.Is(err, errContinue) {
			return err
		}
	}
	return nil
}

// loopInfo is the "loop" variable for iteration i over items.
func loopInfo(items []any, i int) *Dict {
	l := NewDict()
	n := len(items)
	l.Set("index", int64(i+1))
	l.Set("index0", int64(i))
	l.Set("revindex", int64(n-i))
	l.Set("revindex0", int64(n-i-1))
	l.Set("first", i == 0)
	l.Set("last", i == n-1)
	l.Set("length", int64(n))
	if i > 0 {
		l.Set("previtem", items[i-1])
	}
	if i+1 < n {
		l.Set("nextitem", items[i+1])
	}
	l.Set("cycle", Func(func(args []any, _ *Dict) (any, error) {
		if len(args) == 0 {
			return nil, errors.New("loop.cycle needs at least one argument")
		}
		return args[i%len(args)], nil
	}))
	return l
}

// macro turns a macro definition into a callable that renders its body.
func (r *renderer) macro(n *macroNode, def *scope) Func {
	return func(args []any, kwargs *Dict) (any, error) {
		sc := &scope{vars: map[string]any{}, parent: def}
		for i, p := range n.params {
			switch {
			case i < len(args):
				sc.vars[p] = args[i]
			default:
				if v, ok := kwargs.Get(p); ok {
					sc.vars[p] = v
				} else if n.defaults[i] != nil {
					v, err := r.eval(n.defaults[i], def)
					if err != nil {
						return nil, err
					}
					sc.vars[p] = v
				} else {
					sc.vars[p] = Undefined{}
				}
			}
		}
		var b strings.Builder
		if err := r.run(n.body, sc, &b); err != nil {
			return nil, err
		}
		return b.String(), nil
	}
}

func (r *renderer) evalArgs(args []expr, kwargs []kwarg, sc *scope) ([]any, *Dict, error) {
	out := make([]any, len(args))
	for i, a := range args {
		v, err := r.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		out[i] = v
	}
	kw := NewDict()
	for _, k := range kwargs {
		v, err := r.eval(k.x, sc)
		if err != nil {
			return nil, nil, err
		}
		kw.Set(k.name, v)
	}
	return out, kw, nil
}

func (r *renderer) eval(x expr, sc *scope) (any, error) {
	switch x := x.(type) {
	case *literal:
		return x.v, nil
	case *nameExpr:
		return sc.lookup(x.name), nil
	case *attrExpr:
		obj, err := r.eval(x.obj, sc)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, x.name), nil
	case *indexExpr:
		obj, err := r.eval(x.obj, sc)
		if err != nil {
			return nil, err
		}
		idx, err := r.eval(x.idx, sc)
		if err != nil {
			return nil, err
		}
		return getItem(obj, idx), nil
	case *sliceExpr:
		return r.evalSlice(x, sc)
	case *callExpr:
		fn, err := r.eval(x.fn, sc)
		if err != nil {
			return nil, err
		}
		args, kw, err := r.evalArgs(x.args, x.kwargs, sc)
		if err != nil {
			return nil, err
		}
		f, ok := fn.(Func)
		if !ok {
			return nil, errorAt(r.src, x.pos, fmt.Sprintf("%s is not callable", typeName(fn)))
		}
		v, err := f(args, kw)
		if ex, ok := err.(*Exception); ok {
			return nil, &located{errorAt(r.src, x.pos, "while executing a call"), ex}
		}
		return v, err
	case *filterExpr:
		obj, err := r.eval(x.obj, sc)
		if err != nil {
			return nil, err
		}
		return r.applyFilter(x, obj, sc)
	case *testExpr:
		obj, err := r.eval(x.obj, sc)
		if err != nil {
			return nil, err
		}
		args, _, err := r.evalArgs(x.args, nil, sc)
		if err != nil {
			return nil, err
		}
		t, ok := tests[x.name]
		if !ok {
			return nil, fmt.Errorf("unknown test %q", x.name)
		}
		v, err := t(obj, args)
		return v != x.negate, err
	case *unaryExpr:
		v, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch n := v.(type) {
			case int64:
				return -n, nil
			case float64:
				return -n, nil
			}
			return nil, fmt.Errorf("bad operand type for unary -: %s", typeName(v))
		}
		return v, nil
	case *binaryExpr:
		return r.evalBinary(x, sc)
	case *condExpr:
		c, err := r.eval(x.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return r.eval(x.a, sc)
		}
		return r.eval(x.b, sc)
	case *listExpr:
		out := make([]any, len(x.items))
		for i, item := range x.items {
			v, err := r.eval(item, sc)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *dictExpr:
		d := NewDict()
		for i := range x.keys {
			k, err := r.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := r.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.setTyped(k, v)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unknown expression %T", x)
}

// located wraps a call's error with where the call is in the source.
type located struct {
	where error
	err   error
}

func (l *located) Error() string { return l.where.Error() + ": " + l.err.Error() }
func (l *located) Unwrap() error { return l.err }

func (r *renderer) evalSlice(x *sliceExpr, sc *scope) (any, error) {
	obj, err := r.eval(x.obj, sc)
	if err != nil {
		return nil, err
	}
	var bounds [3]any
	for i, e := range []expr{x.start, x.stop, x.step} {
		bounds[i] = nil
		if e != nil {
			if bounds[i], err = r.eval(e, sc); err != nil {
				return nil, err
			}
		}
	}
	var items []any
	str, isStr := obj.(string)
	var runes []rune
	if isStr {
		runes = []rune(str)
		for _, c := range runes {
			items = append(items, string(c))
		}
	} else if items, err = iterate(obj); err != nil {
		return nil, err
	}
	out := sliceItems(items, bounds[0], bounds[1], bounds[2])
	if isStr {
		var b strings.Builder
		for _, c := range out {
			b.WriteString(c.(string))
		}
		return b.String(), nil
	}
	return out, nil
}

func (r *renderer) evalBinary(x *binaryExpr, sc *scope) (any, error) {
	l, err := r.eval(x.l, sc)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	}
	rv, err := r.eval(x.r, sc)
	if err != nil {
		return nil, err
	}
	return binary(x.op, l, rv)
}
