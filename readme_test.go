package redislock_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's Go snippets are taken from the runnable examples: each
// snippet must appear, line for line (indentation and blank lines aside),
// in an example*_test.go file of the repository or in a program under
// examples/, so that the README cannot drift from code that compiles and
// runs. A snippet that is a whole program (package main) must be the whole
// of one of those programs.
func TestReadmeSnippetsComeFromExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	var examples [][]string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		program := strings.HasPrefix(path, "examples"+string(filepath.Separator)) && d.Name() == "main.go"
		if !d.IsDir() && (program || strings.HasPrefix(d.Name(), "example") && strings.HasSuffix(d.Name(), "_test.go")) {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			examples = append(examples, normalize(string(b)))
		}
		return nil
	})
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.NotEqual(t, 0, len(blocks), "no Go snippets found in README.md")
	for _, b := range blocks {
		snippet := normalize(b[1])
		if len(snippet) == 1 && strings.HasPrefix(snippet[0], "import ") {
			continue // the import line
		}
		if snippet[0] == "package main" {
			assert.True(t, slices.ContainsFunc(examples, func(ex []string) bool { return slices.Equal(withoutComment(ex), snippet) }), "README program is no program under examples/, whole:\n%s", b[1])
			continue
		}
		assert.True(t, slices.ContainsFunc(examples, func(ex []string) bool { return containsRun(ex, snippet) }), "README snippet is in no example:\n%s", b[1])
	}
}

func normalize(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// withoutComment drops a program's leading doc comment (the README shows
// the program from its package clause on).
func withoutComment(lines []string) []string {
	for len(lines) > 0 && strings.HasPrefix(lines[0], "//") {
		lines = lines[1:]
	}
	return lines
}

// containsRun reports whether run appears in lines as consecutive lines.
func containsRun(lines, run []string) bool {
	for i := 0; i+len(run) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(run)], run) {
			return true
		}
	}
	return false
}
