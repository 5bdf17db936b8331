package tokenizer

import (
	"fmt"
	"strings"

	"github.com/dlclark/regexp2"
)

// BPE pre-tokenization as llama.cpp's unicode_regex_split: the regexes of a pre-tokenizer type
// run one after the other, each splitting the pieces the previous ones left; text between
// matches stays a piece of its own. The GPT-2 and Llama 3 patterns have hand-written splitters
// (as in llama.cpp); every other pattern runs on a backtracking engine (regexp2, standing in
// for std::regex) over the same transformed text llama.cpp feeds std::regex.

// Regexes llama.cpp uses, named after the pre-tokenizer types sharing them.
const (
	reGPT2         = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	reLlama3       = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2        = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reCJK          = "[一-龥ࠀ-一가-퟿]+"
	rePoro         = ` ?[^(\s|.,!?…。，、।۔،)]+`
	reTekken       = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reGPT4o        = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reDSLLMLetters = "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
	reDSV3Words    = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// preType is what llama.cpp derives from tokenizer.ggml.pre: the regexes and the flags that go
// with them.
type preType struct {
	regexes      []string
	cleanSpaces  bool // detokenize removes spaces before punctuation (clean_up_tokenization_spaces)
	ignoreMerges bool // a word that is a token as a whole skips BPE
	addBOS       bool // llama.cpp's default for tokenizer.ggml.add_bos_token
}

// preTypeFor maps tokenizer.ggml.pre as llama.cpp's llama_vocab::impl::load does, for the
// pre-tokenizers implemented here.
func preTypeFor(pre string) (preType, error) {
	var (
		def      = preType{regexes: []string{`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`}, cleanSpaces: true}
		gpt2     = preType{regexes: []string{reGPT2}, cleanSpaces: true}
		starcode = preType{regexes: []string{`\p{N}`, reGPT2}, cleanSpaces: true}
		llama3   = preType{regexes: []string{reLlama3}, cleanSpaces: true, ignoreMerges: true, addBOS: true}
		qwen2    = preType{regexes: []string{reQwen2}}
		dsv3     = preType{regexes: []string{`\p{N}{1,3}`, "[一-龥぀-ゟ゠-ヿ]+", reDSV3Words}}
	)
	switch pre {
	case "", "default":
		return def, nil
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano":
		return llama3, nil
	case "dbrx", "smaug-bpe":
		return preType{regexes: []string{reLlama3}, cleanSpaces: true}, nil
	case "deepseek-llm":
		return preType{regexes: []string{"[\r\n]", reDSLLMLetters, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", `\s+$`, reCJK, `\p{N}+`}}, nil
	case "deepseek-coder":
		return preType{regexes: []string{"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, reCJK, `\p{N}`}}, nil
	case "deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4":
		return dsv3, nil
	case "falcon":
		return preType{regexes: []string{"[\\p{P}\\$\\+<=>\\^~\\|`]+", reGPT2, `[0-9][0-9][0-9]`}, cleanSpaces: true}, nil
	case "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
		"modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4":
		return gpt2, nil
	case "trillion", "granite-docling":
		return preType{regexes: []string{reGPT2}}, nil
	case "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2":
		return starcode, nil
	case "command-r", "smollm":
		return preType{regexes: starcode.regexes}, nil
	case "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open":
		return qwen2, nil
	case "stablelm2", "megrez":
		return preType{regexes: []string{reQwen2}, cleanSpaces: true}, nil
	case "poro-chat":
		return preType{regexes: []string{rePoro}}, nil
	case "bloom", "gpt3-finnish":
		return preType{regexes: []string{rePoro}, cleanSpaces: true}, nil
	case "viking":
		return preType{regexes: []string{rePoro, `\p{N}`}}, nil
	case "tekken":
		return preType{regexes: []string{reTekken}, ignoreMerges: true, addBOS: true}, nil
	case "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2":
		return preType{regexes: []string{reGPT4o}}, nil
	}
	return preType{}, fmt.Errorf("tokenizer: pre-tokenizer type %q not supported yet", pre)
}

// splitter is a compiled pre-tokenizer.
type splitter struct {
	steps        []splitStep
	needCollapse bool
}

// splitStep is one regex: a hand-written splitter (custom) or a compiled pattern that runs on
// the collapsed or the wide text.
type splitStep struct {
	custom    func(cpts []rune, offsets []int) []int
	re        *regexp2.Regexp
	collapsed bool
}

// unicodeClasses are the \p{..} classes llama.cpp rewrites, with the byte that stands for each
// category in collapsed text and the ASCII members of the category.
var unicodeClasses = []struct {
	name  string
	flag  cptFlags
	ascii string
}{
	{`\p{N}`, flagNumber, `0-9`},
	{`\p{L}`, flagLetter, `A-Za-z`},
	{`\p{P}`, flagPunct, `!-#%-*,-/:-;?-@\[-\]_\{\}`},
	{`\p{M}`, flagMark, ``},
	{`\p{S}`, flagSymbol, `\$\+<->^` + "`" + `\|`},
	{`\p{Lu}`, flagLetter, `A-Za-z`},
	{`\p{Ll}`, flagLetter, `A-Za-z`},
	{`\p{Lt}`, flagLetter, `A-Za-z`},
	{`\p{Lm}`, flagLetter, `A-Za-z`},
	{`\p{Lo}`, flagLetter, `A-Za-z`},
}

// collapsedByte is the stand-in llama.cpp writes for a non-ASCII code point of each category.
func collapsedByte(f cptFlags) rune {
	switch f & categoryMask {
	case flagNumber:
		return 0xD1
	case flagLetter:
		return 0xD2
	case flagPunct:
		return 0xD3
	case flagMark:
		return 0xD4
	case flagSymbol:
		return 0xD5
	}
	return 0xD0
}

func usesClasses(expr string) bool {
	for _, c := range unicodeClasses {
		if strings.Contains(expr, c.name) {
			return true
		}
	}
	return false
}

// collapseRegex rewrites expr as llama.cpp does for collapsed text: each \p{..} becomes a class
// of its stand-in byte and its ASCII members, merged into an enclosing [..] if there is one.
func collapseRegex(expr string) string {
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == '[' && (i == 0 || expr[i-1] != '\\') {
			b.WriteByte('[')
			inside = true
			continue
		}
		if inside && c == ']' && expr[i-1] != '\\' {
			b.WriteByte(']')
			inside = false
			continue
		}
		if c == '\\' && i+3 < len(expr) && expr[i+1] == 'p' && expr[i+2] == '{' {
			if j := strings.IndexByte(expr[i+3:], '}'); j >= 0 && i+3+j <= i+10 {
				pat := expr[i : i+3+j+1]
				found := false
				for _, uc := range unicodeClasses {
					if uc.name != pat {
						continue
					}
					if !inside {
						b.WriteByte('[')
					}
					fmt.Fprintf(&b, `\u%04X%s`, collapsedByte(uc.flag), uc.ascii)
					if !inside {
						b.WriteByte(']')
					}
					found = true
					break
				}
				if found {
					i += 3 + j
					continue
				}
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// ecmaEnd turns a final "$" (ECMAScript: end of input only) into \z, because regexp2's "$" also
// matches before a final newline.
func ecmaEnd(expr string) string {
	if strings.HasSuffix(expr, "$") && !strings.HasSuffix(expr, `\$`) {
		return expr[:len(expr)-1] + `\z`
	}
	return expr
}

func newSplitter(regexes []string) (*splitter, error) {
	s := &splitter{}
	for _, expr := range regexes {
		switch expr {
		case reGPT2:
			s.steps = append(s.steps, splitStep{custom: splitGPT2})
			continue
		case reLlama3:
			s.steps = append(s.steps, splitStep{custom: splitLlama3})
			continue
		}
		step := splitStep{collapsed: usesClasses(expr)}
		pattern := ecmaEnd(expr)
		if step.collapsed {
			s.needCollapse = true
			pattern = collapseRegex(pattern)
		}
		re, err := regexp2.Compile(pattern, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: pre-tokenizer regex %q: %w", expr, err)
		}
		step.re = re
		s.steps = append(s.steps, step)
	}
	return s, nil
}

// split returns the lengths, in code points, of the pieces of cpts.
func (s *splitter) split(cpts []rune) []int {
	offsets := []int{len(cpts)}
	if len(cpts) == 0 {
		return nil
	}
	var collapsed, wide []rune
	for _, step := range s.steps {
		if step.custom != nil {
			offsets = step.custom(cpts, offsets)
			continue
		}
		var text []rune
		if step.collapsed {
			if collapsed == nil {
				collapsed = make([]rune, len(cpts))
				for i, c := range cpts {
					switch f := flagsOf(c); {
					case c < 0x80:
						collapsed[i] = c
					case f&flagWhitespace != 0:
						collapsed[i] = 0x0B
					default:
						collapsed[i] = collapsedByte(f)
					}
				}
			}
			text = collapsed
		} else {
			if wide == nil {
				wide = make([]rune, len(cpts))
				for i, c := range cpts {
					wide[i] = c
					if c > 0x7F && flagsOf(c)&flagWhitespace != 0 {
						wide[i] = 0x0B
					}
				}
			}
			text = wide
		}
		offsets = splitRegex(step.re, text, offsets)
	}
	return offsets
}

// splitRegex is unicode_regex_split_stl: each piece is cut at the matches of re.
func splitRegex(re *regexp2.Regexp, text []rune, offsets []int) []int {
	out := make([]int, 0, len(offsets))
	start := 0
	for _, n := range offsets {
		chunk := text[start : start+n]
		prev := 0
		m, _ := re.FindRunesMatch(chunk)
		for m != nil {
			if m.Index > prev {
				out = append(out, m.Index-prev)
			}
			if m.Length > 0 {
				out = append(out, m.Length)
			}
			prev = m.Index + m.Length
			m, _ = re.FindNextMatch(m)
		}
		if prev < n {
			out = append(out, n-prev)
		}
		start += n
	}
	return out
}
