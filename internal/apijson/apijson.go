// Package apijson writes llama-server's JSON answers for the handlers that live outside the
// generated API (tools, the CORS proxy, the router): bodies, error bodies, and the 403 of a
// feature the server was started without.
package apijson

import (
	"encoding/json"
	"net/http"
)

// Write writes v as a JSON answer with status code.
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Error writes llama-server's error body {"error": {"code", "message", "type"}}.
func Error(w http.ResponseWriter, code int, typ, msg string) {
	Write(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "type": typ}})
}

// Disabled answers llama-server's 403 for a feature the server was not started with.
func Disabled(w http.ResponseWriter) {
	Write(w, http.StatusForbidden, map[string]any{"error": map[string]any{"message": "this feature is disabled", "type": "feature_disabled"}})
}
