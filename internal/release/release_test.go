package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// writeTree writes files (slash-separated name: contents) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		file := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, []byte(data), 0o644))
	}
}

// repo makes a git repository with a workspace of two modules, the root
// and sub, sub requiring the root, and chdirs into it.
func repo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"go.mod":      "module example.com/r\n\ngo 1.25.0\n",
		"r.go":        "package r\n",
		"LICENSE":     "license\n",
		".gitignore":  "/built\n",
		"built":       "a build output, ignored\n",
		"sub/go.mod":  "module example.com/r/sub\n\ngo 1.25.0\n\nrequire (\n\texample.com/r v0.1.0 // a comment\n\texample.com/other v1.0.0\n)\n",
		"sub/sub.go":  "package sub\n",
		"test/go.mod": "module example.com/r/test\n\ngo 1.25.0\n\nreplace example.com/r => ../\n\nrequire example.com/r v0.1.0\n",
		"go.work":     "go 1.25.0\n\nuse (\n\t.\n\t./sub\n)\n\n// kept\nreplace (\n\texample.com/r v0.1.0 => ./\n\texample.com/r/sub v0.1.0 => ./sub\n)\n",
	})
	git(t, root, "init", "-q")
	git(t, root, "add", "-A")
	git(t, root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
	writeTree(t, root, map[string]string{"new.go": "package r // untracked, not ignored: part of the next commit\n"})
	t.Chdir(root)
	return root
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v\n%s", args, out)
}

func TestVersionAndTags(t *testing.T) {
	root := repo(t)
	ws, err := loadWorkspace()
	require.NoError(t, err)
	require.Equal(t, "v0.1.0", ws.version, "workspace version")
	require.Len(t, ws.modules, 2, "workspace modules")
	require.Error(t, ws.setVersion("v2.0.0"), "v2.0.0 for a path without /v2: accepted")
	require.NoError(t, ws.setVersion("v0.2.0"))
	sub, _ := os.ReadFile(filepath.Join(root, "sub", "go.mod"))
	assert.Contains(t, string(sub), "example.com/r v0.2.0 // a comment", "sub/go.mod")
	assert.Contains(t, string(sub), "example.com/other v1.0.0", "sub/go.mod")
	// A module outside the workspace too.
	test, _ := os.ReadFile(filepath.Join(root, "test", "go.mod"))
	assert.Contains(t, string(test), "require example.com/r v0.2.0", "test/go.mod")
	work, _ := os.ReadFile(filepath.Join(root, "go.work"))
	assert.Contains(t, string(work), "// kept\nreplace (\n\texample.com/r v0.2.0 => ./\n\texample.com/r/sub v0.2.0 => ./sub\n)", "go.work")
	ws, err = loadWorkspace()
	require.NoError(t, err, "reloaded")
	require.Equal(t, "v0.2.0", ws.version, "reloaded")
	assert.Equal(t, []string{"v0.2.0", "sub/v0.2.0"}, ws.tags())
}

// The zips publish writes hash as the go command's zips of the commit of
// the same tree do: the hashes a release commit's go.sum records are the
// ones its tags get.
func TestPublishHashesAsTheCommit(t *testing.T) {
	root := repo(t)
	ws, err := loadWorkspace()
	require.NoError(t, err)
	proxy := t.TempDir()
	require.NoError(t, ws.publish(proxy))
	git(t, root, "add", "-A")
	git(t, root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "second")
	for _, m := range ws.modules {
		v := module.Version{Path: m.path, Version: ws.version}
		published := filepath.Join(proxy, m.path, "@v", "v0.1.0.zip")
		fromVCS := filepath.Join(t.TempDir(), "vcs.zip")
		f, err := os.Create(fromVCS)
		require.NoError(t, err)
		require.NoError(t, zip.CreateFromVCS(f, v, root, "HEAD", m.rel))
		f.Close()
		want, err := dirhash.HashZip(fromVCS, dirhash.Hash1)
		require.NoError(t, err)
		got, err := dirhash.HashZip(published, dirhash.Hash1)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s: the published zip's hash, against the commit's", m.path)
	}
	for _, file := range []string{"example.com/r/@v/list", "example.com/r/@v/v0.1.0.mod", "example.com/r/@v/v0.1.0.info", "example.com/r/sub/@v/v0.1.0.mod"} {
		assert.FileExists(t, filepath.Join(proxy, file))
	}
}
