// Package openapi holds the OpenAPI specification of the server API (openapi.yaml), the source
// of truth for package gen, which ogen generates from it.
//
// Regenerate with `go generate ./openapi/` from the repository root; ogen's version is pinned
// by the tool directive in go.mod, and options are in .ogen.yml beside this file.
package openapi

//go:generate go tool ogen --config .ogen.yml --target ../gen --package gen --clean openapi.yaml
