// Package webui holds the web UI: a Svelte app (src/, built by Vite into dist/, which is
// committed so that `go build` needs no Node) and Files, the built bundle the server embeds and
// serves at "/". CI rebuilds dist/ from package-lock.json and fails when it differs.
package webui

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Files is the built bundle: index.html at its root, hashed assets under assets/.
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("webui: " + err.Error()) // "dist" is a valid path: fs.Sub cannot fail on it
	}
	return sub
}
