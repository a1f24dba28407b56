// Package static holds the files the browser loads: refundd's own CSS and
// scripts, and the front-end packages that make copies from node_modules
// into vendor/ (git-ignored, so a plain `go build` works without them).
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"path"
)

// files embeds the whole folder: `*` still compiles when vendor/ is missing,
// where naming vendor/ explicitly would not. The Go sources it also picks up
// are never served (see FS).
//
//go:embed *
var files embed.FS

// servable are the kinds of file the browser may fetch.
var servable = map[string]bool{
	".css": true, ".js": true, ".map": true, ".svg": true, ".png": true, ".ico": true, ".woff2": true,
}

// FS is the servable static files, rooted at this folder.
func FS() fs.FS { return filteredFS{files} }

// versions maps each servable file to a short hash of its content, computed
// once at start, so URLs change whenever the content does.
var versions = func() map[string]string {
	v := map[string]string{}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !servable[path.Ext(p)] {
			return nil
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return nil
		}
		sum := sha256.Sum256(b)
		v[p] = hex.EncodeToString(sum[:6])
		return nil
	})
	return v
}()

// URL is the address of a static file with its content version attached,
// e.g. URL("app.css") = "/static/app.css?v=1a2b3c4d5e6f". Because the URL
// changes with the content, responses to versioned URLs can be cached for good.
func URL(name string) string {
	if v, ok := versions[name]; ok {
		return "/static/" + name + "?v=" + v
	}
	return "/static/" + name
}

// Version reports the current content version of name ("" if unknown).
func Version(name string) string { return versions[name] }

type filteredFS struct{ fsys fs.FS }

func (f filteredFS) Open(name string) (fs.File, error) {
	file, err := f.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	if st.IsDir() || !servable[path.Ext(name)] {
		// Directories are not listed and sources are not served.
		file.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return file, nil
}
