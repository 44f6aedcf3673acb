package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chain makes a workspace of three modules, c importing b importing the
// root r, and chdirs into it.
func chain(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"go.mod":   "module example.com/r\n\ngo 1.25.0\n",
		"r.go":     "package r\n\nconst R = 1\n",
		"b/go.mod": "module example.com/r/b\n\ngo 1.25.0\n\nrequire example.com/r v0.1.0\n",
		"b/b.go":   "package b\n\nimport \"example.com/r\"\n\nconst B = r.R\n",
		"c/go.mod": "module example.com/r/c\n\ngo 1.25.0\n\nrequire example.com/r/b v0.1.0\n",
		"c/c.go":   "package c\n\nimport \"example.com/r/b\"\n\nconst C = b.B\n",
		"go.work":  "go 1.25.0\n\nuse (\n\t.\n\t./b\n\t./c\n)\n\nreplace (\n\texample.com/r v0.1.0 => ./\n\texample.com/r/b v0.1.0 => ./b\n\texample.com/r/c v0.1.0 => ./c\n)\n",
	})
	git(t, root, "init", "-q")
	t.Chdir(root)
	return root
}

// After tidy -sums, every module builds outside the workspace from the
// tree published as it is, with its go.sum as it is (-mod=readonly): c's
// hash of b is that of b's zip with b's final go.sum in it.
func TestTidySumsMatchThePublishedZips(t *testing.T) {
	root := chain(t)
	ws, err := loadWorkspace()
	require.NoError(t, err)
	require.NoError(t, ws.tidy(true))
	sum, _ := os.ReadFile(filepath.Join(root, "c", "go.sum"))
	require.Contains(t, string(sum), "example.com/r/b v0.1.0 h1:", "c/go.sum")
	require.Contains(t, string(sum), "example.com/r v0.1.0 h1:", "c/go.sum")
	proxy := t.TempDir()
	require.NoError(t, ws.publish(proxy))
	env := append(os.Environ(), "GOWORK=off", "GOPROXY="+fileURL(proxy), "GONOSUMDB=example.com",
		"GOMODCACHE="+t.TempDir(), "GOFLAGS=-modcacherw")
	for _, dir := range []string{"b", "c"} {
		cmd := exec.Command("go", "build", "-mod=readonly", "./...")
		cmd.Dir, cmd.Env = filepath.Join(root, dir), env
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "%s: go build outside the workspace\n%s", dir, out)
	}

	// Without -sums, the repository's own lines are dropped.
	require.NoError(t, ws.tidy(false))
	sum, _ = os.ReadFile(filepath.Join(root, "c", "go.sum"))
	assert.NotContains(t, string(sum), "example.com/r", "c/go.sum after tidy without -sums")
}
