package engine

// samplerKind is one step of the sampler chain.
type samplerKind uint8

const (
	samplerPenalties samplerKind = iota
	samplerDRY
	samplerTopNSigma
	samplerTopK
	samplerTypicalP
	samplerTopP
	samplerMinP
	samplerXTC
	samplerTemperature
	samplerInfill
	samplerAdaptiveP
)

// samplerNames are llama.cpp's canonical sampler names.
var samplerNames = map[string]samplerKind{
	"penalties":   samplerPenalties,
	"dry":         samplerDRY,
	"top_n_sigma": samplerTopNSigma,
	"top_k":       samplerTopK,
	"typ_p":       samplerTypicalP,
	"top_p":       samplerTopP,
	"min_p":       samplerMinP,
	"xtc":         samplerXTC,
	"temperature": samplerTemperature,
	"infill":      samplerInfill,
	"adaptive_p":  samplerAdaptiveP,
}

// samplerAltNames are the other spellings llama.cpp accepts (common_sampler_types_from_names
// with allow_alt_names).
var samplerAltNames = map[string]samplerKind{
	"top-k":       samplerTopK,
	"top-p":       samplerTopP,
	"top-n-sigma": samplerTopNSigma,
	"nucleus":     samplerTopP,
	"typical-p":   samplerTypicalP,
	"typical":     samplerTypicalP,
	"typ-p":       samplerTypicalP,
	"typ":         samplerTypicalP,
	"min-p":       samplerMinP,
	"temp":        samplerTemperature,
	"adaptive-p":  samplerAdaptiveP,
}

// samplerChars are the one-letter names of common_sampler_types_from_chars.
var samplerChars = map[rune]string{
	'e': "penalties", 'd': "dry", 's': "top_n_sigma", 'k': "top_k", 'y': "typ_p",
	'p': "top_p", 'm': "min_p", 'x': "xtc", 't': "temperature", 'i': "infill", 'a': "adaptive_p",
}

// DefaultSamplers is llama-server's default sampler order.
func DefaultSamplers() []string {
	return []string{"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"}
}

// CanonicalSamplerName maps a sampler name to llama.cpp's canonical spelling; allowAlt also
// accepts the alternative spellings ("top-k", "nucleus", "temp", ...). ok is false for an
// unknown name, which llama-server skips.
func CanonicalSamplerName(name string, allowAlt bool) (canonical string, ok bool) {
	if _, ok := samplerNames[name]; ok {
		return name, true
	}
	if !allowAlt {
		return "", false
	}
	k, ok := samplerAltNames[name]
	if !ok {
		return "", false
	}
	for n, v := range samplerNames {
		if v == k {
			return n, true
		}
	}
	return "", false
}

// SamplersFromChars expands llama-server's one-letter sampler string ("edskypmxt"); unknown
// letters are skipped as llama.cpp does.
func SamplersFromChars(s string) []string {
	var out []string
	for _, r := range s {
		if n, ok := samplerChars[r]; ok {
			out = append(out, n)
		}
	}
	return out
}

// samplerChain parses names (canonical or alternative) into the chain; unknown names are
// skipped, and nil means the default order.
func samplerChain(names []string) []samplerKind {
	if names == nil {
		names = DefaultSamplers()
	}
	chain := make([]samplerKind, 0, len(names))
	for _, n := range names {
		if c, ok := CanonicalSamplerName(n, true); ok {
			chain = append(chain, samplerNames[c])
		}
	}
	return chain
}
