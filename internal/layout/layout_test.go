// Package layout checks the dependency rules of the design: what each part
// of the repository may import. It has tests only.
package layout

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mod = "github.com/redislock-go/redislock"

// pkg is what go list tells of one package.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string // without tests
	Imports    []string // direct, without tests
	Deps       []string // transitive, without tests
}

// list runs go list on patterns (relative to the module path) and returns
// the packages by path.
func list(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	args := []string{"list", "-json=ImportPath,Name,Dir,GoFiles,Imports,Deps"}
	for _, p := range patterns {
		args = append(args, mod+p)
	}
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s\n%s", strings.Join(args, " "), stderr.String())
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// workspace reports whether the repository's other modules are in the
// build (go.work), so that their rules can be checked too.
func workspace(t *testing.T) bool {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	require.NoError(t, err)
	w := strings.TrimSpace(string(out))
	return w != "" && w != "off"
}

// within reports whether path is the package dir of this repository or
// one below it.
func within(path, dir string) bool {
	p := mod + dir
	return path == p || strings.HasPrefix(path, p+"/")
}

// rule is one dependency rule: no package of from may depend on a package
// for which bad is true (through Deps, or only directly through Imports).
type rule struct {
	name   string
	from   func(path string) bool
	direct bool
	bad    func(dep string) bool
}

var rules = []rule{
	{
		name: "lease imports nothing of this repository and not go-redis",
		from: func(p string) bool { return within(p, "/lease") },
		bad: func(d string) bool {
			return strings.HasPrefix(d, "github.com/redis/go-redis") || within(d, "") && !within(d, "/lease")
		},
	},
	{
		name: "internal/* knows no Client or Lock (the root package)",
		from: func(p string) bool { return within(p, "/internal") },
		bad:  func(d string) bool { return d == mod },
	},
	{
		name: "stampede, dedup and leader are built on lease (and observe) alone",
		from: func(p string) bool { return within(p, "/stampede") || within(p, "/dedup") || within(p, "/leader") },
		bad: func(d string) bool {
			return within(d, "") && !within(d, "/lease") && !within(d, "/observe")
		},
	},
	{
		name: "semaphore knows no Client or Lock (the root package)",
		from: func(p string) bool { return within(p, "/semaphore") },
		bad:  func(d string) bool { return d == mod },
	},
	{
		name:   "semaphore is built on lease, observe, internal/script and internal/wake (and nodes.IsNil, the keys' layout)",
		from:   func(p string) bool { return within(p, "/semaphore") },
		direct: true,
		bad: func(d string) bool {
			return within(d, "") && !within(d, "/lease") && !within(d, "/observe") &&
				d != mod+"/internal/script" && d != mod+"/internal/wake" && d != mod+"/internal/nodes" && d != mod+"/internal/keys"
		},
	},
	{
		name: "the root imports no pattern, adapter, pglock or the command",
		from: func(p string) bool { return p == mod },
		bad: func(d string) bool {
			for _, dir := range []string{"/stampede", "/dedup", "/leader", "/semaphore", "/extra", "/pglock", "/cmd", "/bench", "/chaos", "/examples"} {
				if within(d, dir) {
					return true
				}
			}
			return false
		},
	},
	{
		name: "the command never imports bench",
		from: func(p string) bool { return within(p, "/cmd") },
		bad:  func(d string) bool { return within(d, "/bench") },
	},
	{
		name:   "the adapters in extra/ depend on observe and lease only",
		from:   func(p string) bool { return within(p, "/extra") },
		direct: true,
		bad: func(d string) bool {
			return within(d, "") && !within(d, "/observe") && !within(d, "/lease") && d != mod+"/extra/internal/track"
		},
	},
}

// check returns the broken rules' messages for pkgs.
func check(pkgs map[string]pkg) []string {
	var broken []string
	for _, r := range rules {
		for path, p := range pkgs {
			if !r.from(path) {
				continue
			}
			deps := p.Deps
			if r.direct {
				deps = p.Imports
			}
			for _, d := range deps {
				if r.bad(d) {
					broken = append(broken, r.name+": "+path+" imports "+d)
				}
			}
		}
	}
	return broken
}

func TestDependencyRules(t *testing.T) {
	t.Parallel()
	patterns := []string{"/..."}
	if workspace(t) {
		patterns = append(patterns, "/cmd/redislock/...", "/extra/redislockprom/...", "/extra/redislockotel/...", "/pglock/...")
	} else {
		t.Log("no go.work: checking the rules of the root module only")
	}
	pkgs := list(t, patterns...)
	for _, must := range []string{mod, mod + "/lease", mod + "/lease/backend", mod + "/observe", mod + "/stampede"} {
		require.Contains(t, pkgs, must, "go list did not list it")
	}
	assert.Empty(t, check(pkgs), "broken rules")
}

// Each rule catches what it forbids.
func TestRulesFail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ from, dep string }{
		{mod + "/lease", "github.com/redis/go-redis/v9"},
		{mod + "/lease/backend", mod + "/observe"},
		{mod + "/internal/nodes", mod},
		{mod + "/leader", mod + "/internal/keys"},
		{mod + "/semaphore", mod},
		{mod + "/semaphore", mod + "/internal/renew"},
		{mod, mod + "/stampede"},
		{mod + "/cmd/redislock", mod + "/bench/lockbench"},
		{mod + "/extra/redislockprom", mod},
	} {
		got := check(map[string]pkg{c.from: {ImportPath: c.from, Imports: []string{c.dep}, Deps: []string{c.dep}}})
		assert.NotEmpty(t, got, "%s importing %s breaks no rule", c.from, c.dep)
	}
}

// Every module of the repository (each directory with a go.mod: those of
// go.work, and the unpublished ones) has the root's LICENSE, Apache-2.0, in
// its directory, so that its zip carries it.
func TestLicense(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	require.NoError(t, err, "the root has no LICENSE")
	require.Contains(t, string(license), "Apache License\n                           Version 2.0, January 2004")
	require.Contains(t, string(license), "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION")
	require.Contains(t, string(license), "Copyright 2026 The redislock authors")
	dirs := modules(t, root)
	require.Contains(t, dirs, ".")
	for _, dir := range dirs {
		got, err := os.ReadFile(filepath.Join(root, dir, "LICENSE"))
		if assert.NoError(t, err, "module %s has no LICENSE", dir) {
			assert.True(t, bytes.Equal(got, license), "%s/LICENSE is not the root's", dir)
		}
	}
}

// repoRoot returns the repository's root: the root module's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(gomod)))
}

// modules returns the directories under root (relative, "." for root)
// that hold a go.mod, but in hidden directories and testdata.
func modules(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return dirs
}
