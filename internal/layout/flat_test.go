package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lease is flat: no package under lease/internal, and no function of a
// lease package whose body is one call of another package of this
// repository (a forwarder: say it once, where it is defined).
func TestLeaseFlat(t *testing.T) {
	t.Parallel()
	pkgs := list(t, "/lease/...")
	require.Contains(t, pkgs, mod+"/lease/backend", "go list did not list it")
	for path, p := range pkgs {
		assert.False(t, within(path, "/lease/internal"), "%s: lease has no internal packages", path)
		fset := token.NewFileSet()
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			assert.Empty(t, forwarders(fset, f), "%s: one-line forwarders", path)
		}
	}
}

// forwarders returns the functions of f (and methods) whose body is one
// call of a function of another package of this repository, returned or
// not.
func forwarders(fset *token.FileSet, f *ast.File) []string {
	repo := map[string]bool{} // the names f imports this repository's packages as
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !within(path, "") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		repo[name] = true
	}
	var found []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil || len(fn.Body.List) != 1 {
			continue
		}
		var call ast.Expr
		switch s := fn.Body.List[0].(type) {
		case *ast.ReturnStmt:
			if len(s.Results) == 1 {
				call = s.Results[0]
			}
		case *ast.ExprStmt:
			call = s.X
		}
		c, ok := call.(*ast.CallExpr)
		if !ok {
			continue
		}
		if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && repo[x.Name] {
				found = append(found, fset.Position(fn.Pos()).String()+": "+fn.Name.Name)
			}
		}
	}
	return found
}

// The check finds a forwarder, and leaves alone a call of another module's
// package and a function that does more.
func TestForwardersFound(t *testing.T) {
	t.Parallel()
	const src = `package backend

import (
	"time"

	"github.com/redislock-go/redislock/lease"
)

func Drift(ttl time.Duration, f float64) time.Duration { return lease.Drift(ttl, f) }

func Now() time.Time { return time.Now() }

func Check(ttl time.Duration) error {
	if ttl < 0 {
		return lease.Invalid("negative")
	}
	return nil
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "src.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	got := forwarders(fset, f)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "Drift")
}
