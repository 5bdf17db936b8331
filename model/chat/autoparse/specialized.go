package autoparse

// Specialized returns the dedicated format llama.cpp uses for a template whose source it
// recognises (common_chat_templates_apply_jinja tries them before the autoparser), or nil. No
// template matches both families' detections, so their relative order does not matter.
func Specialized(src string) Builder {
	if b := specializedClassic(src); b != nil {
		return b
	}
	if b := specializedNewer(src); b != nil {
		return b
	}
	return nil
}
