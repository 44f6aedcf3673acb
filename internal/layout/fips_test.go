package layout

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refused are the crypto packages whose use panics under
// GODEBUG=fips140=only (or that no FIPS 140 mode allows): no package of
// this repository imports one.
var refused = []string{"crypto/md5", "crypto/sha1", "crypto/des", "crypto/rc4", "golang.org/x/crypto/md4", "golang.org/x/crypto/ripemd160", "golang.org/x/crypto/blowfish"}

// initRefused are the modules outside this repository whose package init
// computes what fips140=only refuses: a package that links one cannot
// start in that mode.
var initRefused = map[string]string{
	"github.com/bsm/redislock": "its package-level redis.NewScript computes SHA-1 (v0.9.4, the latest); the bench compares with it",
}

// No package of the repository (command, bench, examples included) imports
// a crypto package fips140=only refuses.
func TestNoRefusedCrypto(t *testing.T) {
	t.Parallel()
	for path, p := range list(t, "/...") {
		for _, imp := range p.Imports {
			assert.NotContains(t, refused, imp, "%s imports %s, which GODEBUG=fips140=only refuses", path, imp)
		}
	}
}

// Every package of the repository that can be imported starts under
// GODEBUG=fips140=only: a program that imports them all, built in the
// module (an overlay adds it, so it may import internal packages), runs
// without a panic at init. Packages that link a module of initRefused are
// left out, and named.
func TestImportUnderFIPSOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program of every package")
	}
	t.Parallel()
	if !workspace(t) {
		t.Log("no go.work: the root module's packages only")
	}
	const prog = mod + "/internal/layout/fipsinit"
	pkgs := list(t, "/...")
	var imports, left, inner []string
	for path, p := range pkgs {
		switch {
		case p.Name == "main" || len(p.GoFiles) == 0:
			// a command (cmd/redislock has a test of its own), or tests only
		case linksInitRefused(p) != "":
			m := linksInitRefused(p)
			left = append(left, path+" (links "+m+": "+initRefused[m]+")")
		case !importable(path, prog):
			inner = append(inner, path) // another tree's internal package: through its importers
		default:
			imports = append(imports, path)
		}
	}
	slices.Sort(imports)
	require.Contains(t, imports, mod+"/internal/script")
	require.Contains(t, imports, mod+"/semaphore")
	for _, l := range left {
		t.Log("left out:", l)
	}
	for _, in := range inner {
		assert.True(t, slices.ContainsFunc(imports, func(p string) bool { return slices.Contains(pkgs[p].Deps, in) }),
			"%s: an internal package no imported package links", in)
	}

	src := "// Command fipsinit imports every package of the repository.\npackage main\n\nimport (\n"
	for _, p := range imports {
		src += "\t_ \"" + p + "\"\n"
	}
	src += ")\n\nfunc main() { println(\"ok\") }\n"
	tmp := t.TempDir()
	main := filepath.Join(tmp, "main.go")
	require.NoError(t, os.WriteFile(main, []byte(src), 0o644))
	here, err := os.Getwd()
	require.NoError(t, err)
	dir := filepath.Join(here, "fipsinit") // does not exist: the overlay's alone
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, "main.go"): main}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "overlay.json"), overlay, 0o644))
	bin := filepath.Join(tmp, "fipsinit")
	out, err := exec.Command("go", "build", "-overlay", filepath.Join(tmp, "overlay.json"), "-o", bin, "./fipsinit").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "a program importing %d packages, under GODEBUG=fips140=only:\n%s", len(imports), out)
	require.Equal(t, "ok", strings.TrimSpace(string(out)))
}

// importable reports whether the package path may be imported by the
// package from: an internal package only within the tree its internal
// directory's parent roots.
func importable(path, from string) bool {
	i := strings.LastIndex(path+"/", "/internal/")
	if i < 0 {
		return true
	}
	root := path[:i]
	return from == root || strings.HasPrefix(from, root+"/")
}

// linksInitRefused returns the module of initRefused p links, or "".
func linksInitRefused(p pkg) string {
	for _, d := range p.Deps {
		for m := range initRefused {
			if d == m || strings.HasPrefix(d, m+"/") {
				return m
			}
		}
	}
	return ""
}
