package main

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// layoutSkipped are the directories the layout section need not name and
// whose contents the test does not look into: data, dependencies, test
// fixtures, files `make` copies in or builds (both ignored by git), git and
// CI.
var layoutSkipped = []string{".data", "node_modules", "testdata", "static/vendor", "bin", ".git", ".ci"}

// TestREADME_LayoutMatchesTheTree holds README's "## Code layout" section
// to the tree both ways: every path it names in backticks exists, and every
// top-level directory, every Go package directory and every Go file of the
// root package is named there. A path in a table row's text is looked up
// in that row's directory first, then from the repository root.
func TestREADME_LayoutMatchesTheTree(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := layoutSection(t, string(readme))
	named := namedPaths(section)
	if len(named) == 0 {
		t.Fatal(`README's "## Code layout" names no path in backticks`)
	}

	t.Run("every named path exists", func(t *testing.T) {
		for _, n := range named {
			if skippedPath(n.path) {
				continue
			}
			if _, ok := resolve(n); !ok {
				t.Errorf("README's layout names `%s`, which is not in the tree", n.text)
			}
		}
	})
	t.Run("every directory and root file is named", func(t *testing.T) {
		have := map[string]bool{}
		for _, n := range named {
			if p, ok := resolve(n); ok {
				have[p] = true
			}
		}
		for _, want := range layoutWanted(t) {
			if !have[want] {
				t.Errorf("README's layout does not name `%s`; add a row for it", displayPath(want))
			}
		}
	})
}

// layoutSection is the text of README's "## Code layout" section, up to the
// next heading of the same level.
func layoutSection(t *testing.T, readme string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n## Code layout\n")
	if !ok {
		t.Fatal(`README.md has no "## Code layout" section`)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// namedPath is a path the layout section names, and the directory of the
// table row it was named in ("" outside a row, or in a row of a file).
type namedPath struct {
	text         string // as written
	path, rowDir string
}

var (
	backticked = regexp.MustCompile("`([^`\\s]+)`")
	// looksLikePath: a directory (ends in /), a file with one of the
	// extensions the repository holds, or a path with a slash in it.
	looksLikePath = regexp.MustCompile(`^[A-Za-z0-9_.\-/]+$`)
	fileExt       = regexp.MustCompile(`[A-Za-z0-9_-]\.(go|json|md|sql|js|css|templ|png|mod|sum)$`)
)

// namedPaths is every path the section names in backticks. Globs and
// command lines are not paths.
func namedPaths(section string) []namedPath {
	var out []namedPath
	for _, line := range strings.Split(section, "\n") {
		rowDir := ""
		if cells := strings.Split(line, "|"); strings.HasPrefix(line, "|") && len(cells) > 2 {
			if m := backticked.FindStringSubmatch(cells[1]); m != nil && strings.HasSuffix(m[1], "/") {
				rowDir = strings.TrimSuffix(m[1], "/")
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			p := m[1]
			if !looksLikePath.MatchString(p) {
				continue
			}
			if strings.HasSuffix(p, "/") || fileExt.MatchString(p) || strings.Contains(p, "/") {
				out = append(out, namedPath{text: p, path: strings.TrimSuffix(p, "/"), rowDir: rowDir})
			}
		}
	}
	return out
}

// resolve finds n in the tree, in its row's directory first, and returns
// it relative to the root, in slash form.
func resolve(n namedPath) (string, bool) {
	for _, p := range []string{path.Join(n.rowDir, n.path), n.path} {
		if _, err := os.Stat(filepath.FromSlash(p)); err == nil {
			return path.Clean(p), true
		}
	}
	return "", false
}

// layoutWanted is what the section must name: every top-level directory,
// every directory holding a Go package, and the root package's Go files
// other than tests.
func layoutWanted(t *testing.T) []string {
	t.Helper()
	var want []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p = filepath.ToSlash(p)
		if d.IsDir() {
			if p != "." && skippedPath(p) {
				return filepath.SkipDir
			}
			if p != "." && !strings.Contains(p, "/") {
				want = append(want, p)
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		switch dir := path.Dir(p); {
		case dir == "." && !strings.HasSuffix(p, "_test.go"):
			want = append(want, p)
		case dir != ".":
			want = append(want, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	return slices.Compact(want)
}

// skippedPath says p is, or is inside, one of layoutSkipped.
func skippedPath(p string) bool {
	for _, s := range layoutSkipped {
		if p == s || strings.HasPrefix(p, s+"/") || path.Base(p) == s {
			return true
		}
	}
	return false
}

// displayPath is p as the section would name it: directories end in /.
func displayPath(p string) string {
	if st, err := os.Stat(filepath.FromSlash(p)); err == nil && st.IsDir() {
		return p + "/"
	}
	return p
}
