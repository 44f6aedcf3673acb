package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.tidy(true); err != nil {
		t.Fatal(err)
	}
	sum, _ := os.ReadFile(filepath.Join(root, "c", "go.sum"))
	if !strings.Contains(string(sum), "example.com/r/b v0.1.0 h1:") || !strings.Contains(string(sum), "example.com/r v0.1.0 h1:") {
		t.Fatalf("c/go.sum:\n%s", sum)
	}
	proxy := t.TempDir()
	if err := ws.publish(proxy); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOWORK=off", "GOPROXY="+fileURL(proxy), "GONOSUMDB=example.com",
		"GOMODCACHE="+t.TempDir(), "GOFLAGS=-modcacherw")
	for _, dir := range []string{"b", "c"} {
		cmd := exec.Command("go", "build", "-mod=readonly", "./...")
		cmd.Dir, cmd.Env = filepath.Join(root, dir), env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: go build outside the workspace: %v\n%s", dir, err, out)
		}
	}

	// Without -sums, the repository's own lines are dropped.
	if err := ws.tidy(false); err != nil {
		t.Fatal(err)
	}
	if sum, _ := os.ReadFile(filepath.Join(root, "c", "go.sum")); strings.Contains(string(sum), "example.com/r") {
		t.Errorf("c/go.sum after tidy without -sums:\n%s", sum)
	}
}
