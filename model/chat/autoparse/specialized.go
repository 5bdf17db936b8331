package autoparse

// Specialized returns the dedicated format llama.cpp uses for a template whose source it
// recognises (common_chat_templates_apply_jinja tries them before the autoparser), or nil.
func Specialized(src string) Builder {
	if b := specializedNewer(src); b != nil {
		return b
	}
	return nil
}
