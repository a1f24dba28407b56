package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var (
	// settingRead is how config.go reads a setting: env("NAME"),
	// getenv("NAME") or a reader given (env, p, "NAME", …).
	settingRead = regexp.MustCompile(`(?:\benv\(|\bgetenv\(|\(env, p, )"([A-Z][A-Z0-9_]*)"`)
	// settingRow is a row of README's settings table; its first cell names
	// one setting or several, each in backticks.
	settingRow  = regexp.MustCompile("(?m)^\\| (`[A-Z][A-Z0-9_]*`(?:, `[A-Z][A-Z0-9_]*`)*) \\|")
	settingName = regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
)

// TestREADME_DocumentsEverySetting: every environment variable config.go
// reads has a row in README's "## Configuration" table, and every row names
// a variable config.go reads, so a new setting (MAX_FAMILY_SIZE was one)
// cannot go undocumented, nor a removed one stay.
func TestREADME_DocumentsEverySetting(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n## Configuration\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Configuration" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	read := map[string]bool{}
	for _, m := range settingRead.FindAllStringSubmatch(string(src), -1) {
		read[m[1]] = true
	}
	if len(read) < 20 {
		t.Fatalf("found %d settings read in config.go; the pattern no longer matches how it reads them", len(read))
	}
	documented := map[string]bool{}
	for _, row := range settingRow.FindAllStringSubmatch(section, -1) {
		for _, n := range settingName.FindAllStringSubmatch(row[1], -1) {
			documented[n[1]] = true
		}
	}
	for name := range read {
		if !documented[name] {
			t.Errorf("config.go reads %s, but README's settings table has no row for it", name)
		}
	}
	for name := range documented {
		if !read[name] {
			t.Errorf("README's settings table has a row for %s, which config.go does not read", name)
		}
	}
}
