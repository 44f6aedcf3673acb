package layout

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The root package's shape (issue 29): files laid out by lifecycle, each
// short enough to read at once, behind a narrow mode seam; calls whose
// outcome comes late are internal/nodes' business, so the root never
// speaks of settling or abandoning them.
const (
	maxRootFiles  = 17  // non-test files of the root package
	maxRootLines  = 350 // lines of each of them
	maxModeMethod = 6   // methods of the root's mode interface
	maxReleases   = 3   // distinct release* function and method names
)

// nodesWords are internal/nodes' words for late calls, never the root's.
var nodesWords = regexp.MustCompile(`(?i)settle|abandon`)

// rootFiles returns the root package's non-test files, by name, with
// their contents.
func rootFiles(t *testing.T) map[string][]byte {
	t.Helper()
	p, ok := list(t, "")[mod]
	require.True(t, ok, "go list did not list the root package")
	dir := repoRoot(t)
	files := map[string][]byte{}
	for _, name := range p.GoFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		files[name] = b
	}
	return files
}

// releaseVerb matches a release verb's name: release, releaseOn, ...
var releaseVerb = regexp.MustCompile(`^release([A-Z]|$)`)

// releaseVerbs adds to verbs the release verbs f declares: its functions
// and methods named release*, but the methods of the observers type,
// which tell events (obtainStart, releaseDone, ...) and release nothing.
func releaseVerbs(f *ast.File, verbs map[string]bool) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !releaseVerb.MatchString(fd.Name.Name) {
			continue
		}
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			t := fd.Recv.List[0].Type
			if st, ok := t.(*ast.StarExpr); ok {
				t = st.X
			}
			if id, ok := t.(*ast.Ident); ok && id.Name == "observers" {
				continue
			}
		}
		verbs[fd.Name.Name] = true
	}
}

// shape lists what breaks the limits in files: too many, too long, a mode
// interface too wide, more release verbs than one way through needs,
// internal/nodes' words.
func shape(files map[string][]byte) (broken []string) {
	if len(files) > maxRootFiles {
		broken = append(broken, fmt.Sprintf("%d non-test files in the root, at most %d", len(files), maxRootFiles))
	}
	modes := 0
	verbs := map[string]bool{}
	for name, b := range files {
		if n := bytes.Count(b, []byte("\n")); n > maxRootLines {
			broken = append(broken, fmt.Sprintf("%s has %d lines, at most %d", name, n, maxRootLines))
		}
		if w := nodesWords.Find(b); w != nil {
			broken = append(broken, fmt.Sprintf("%s says %q: late calls are internal/nodes' business", name, w))
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, b, parser.SkipObjectResolution)
		if err != nil {
			broken = append(broken, err.Error())
			continue
		}
		releaseVerbs(f, verbs)
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "mode" {
				return true
			}
			modes++
			if it, ok := ts.Type.(*ast.InterfaceType); ok && it.Methods.NumFields() > maxModeMethod {
				broken = append(broken, fmt.Sprintf("%s: mode has %d methods, at most %d", name, it.Methods.NumFields(), maxModeMethod))
			}
			return false
		})
	}
	if len(verbs) > maxReleases {
		names := slices.Sorted(maps.Keys(verbs))
		broken = append(broken, fmt.Sprintf("%d release verbs in the root (%s), at most %d", len(verbs), strings.Join(names, ", "), maxReleases))
	}
	if modes != 1 {
		broken = append(broken, fmt.Sprintf("%d mode types in the root, want 1", modes))
	}
	return broken
}

func TestRootShape(t *testing.T) {
	t.Parallel()
	files := rootFiles(t)
	require.Contains(t, files, "redislock.go")
	assert.Empty(t, shape(files), "the root package's shape")
}

// shape catches each limit it checks.
func TestShapeFails(t *testing.T) {
	t.Parallel()
	releases := "package p\n\ntype mode interface{ a() }\n\nfunc (m *M) release() {}\nfunc releaseOn() {}\nfunc (m *M) releaseNow() {}\n"
	long := "package p\n\ntype mode interface{ a() }\n" + string(bytes.Repeat([]byte("\n"), maxRootLines))
	wide := "package p\n\ntype mode interface{ a(); b(); c(); d(); e(); f(); g() }\n"
	many := map[string][]byte{"m.go": []byte("package p\n\ntype mode interface{ a() }\n")}
	for i := range maxRootFiles {
		many[fmt.Sprintf("f%d.go", i)] = []byte("package p\n")
	}
	for name, files := range map[string]map[string][]byte{
		"long":                  {"m.go": []byte(long)},
		"wide":                  {"m.go": []byte(wide)},
		"many":                  many,
		"no mode":               {"m.go": []byte("package p\n")},
		"settle":                {"m.go": []byte("package p\n\n// Settled late.\ntype mode interface{ a() }\n")},
		"abandon":               {"m.go": []byte("package p\n\ntype mode interface{ a() }\n\nvar isAbandoned bool\n")},
		"releases":              {"m.go": []byte(releases + "func (c *C) releaseLater() {}\n")},
		"releases in two files": {"m.go": []byte(releases), "n.go": []byte("package p\n\nfunc (c *C) releaseLater() {}\n")},
	} {
		assert.NotEmpty(t, shape(files), "%s: no limit broken", name)
	}
	assert.Empty(t, shape(map[string][]byte{"m.go": []byte("package p\n\ntype mode interface{ a() }\n")}))
	// Three verbs, each on several types, and the observers' events pass;
	// so do names that only begin like one.
	assert.Empty(t, shape(map[string][]byte{"m.go": []byte(releases +
		"func (s *S) release() {}\nfunc (o *observers) releaseStart() {}\nfunc (o observers) releaseDone() {}\nfunc releases() {}\n")}))
}
