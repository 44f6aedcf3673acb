package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// writeTree writes files (slash-separated name: contents) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		file := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
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
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func TestVersionAndTags(t *testing.T) {
	root := repo(t)
	ws, err := loadWorkspace()
	if err != nil {
		t.Fatal(err)
	}
	if ws.version != "v0.1.0" || len(ws.modules) != 2 {
		t.Fatalf("workspace: version %q, modules %v", ws.version, ws.modules)
	}
	if err := ws.setVersion("v2.0.0"); err == nil {
		t.Fatal("v2.0.0 for a path without /v2: accepted")
	}
	if err := ws.setVersion("v0.2.0"); err != nil {
		t.Fatal(err)
	}
	sub, _ := os.ReadFile(filepath.Join(root, "sub", "go.mod"))
	if !strings.Contains(string(sub), "example.com/r v0.2.0 // a comment") || !strings.Contains(string(sub), "example.com/other v1.0.0") {
		t.Errorf("sub/go.mod:\n%s", sub)
	}
	// A module outside the workspace too.
	if test, _ := os.ReadFile(filepath.Join(root, "test", "go.mod")); !strings.Contains(string(test), "require example.com/r v0.2.0") {
		t.Errorf("test/go.mod:\n%s", test)
	}
	work, _ := os.ReadFile(filepath.Join(root, "go.work"))
	if !strings.Contains(string(work), "// kept\nreplace (\n\texample.com/r v0.2.0 => ./\n\texample.com/r/sub v0.2.0 => ./sub\n)") {
		t.Errorf("go.work:\n%s", work)
	}
	if ws, err = loadWorkspace(); err != nil || ws.version != "v0.2.0" {
		t.Fatalf("reloaded: %v, %v", ws, err)
	}
	if got := strings.Join(ws.tags(), " "); got != "v0.2.0 sub/v0.2.0" {
		t.Errorf("tags: %s", got)
	}
}

// The zips publish writes hash as the go command's zips of the commit of
// the same tree do: the hashes a release commit's go.sum records are the
// ones its tags get.
func TestPublishHashesAsTheCommit(t *testing.T) {
	root := repo(t)
	ws, err := loadWorkspace()
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	if err := ws.publish(proxy); err != nil {
		t.Fatal(err)
	}
	git(t, root, "add", "-A")
	git(t, root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "second")
	for _, m := range ws.modules {
		v := module.Version{Path: m.path, Version: ws.version}
		published := filepath.Join(proxy, m.path, "@v", "v0.1.0.zip")
		fromVCS := filepath.Join(t.TempDir(), "vcs.zip")
		f, err := os.Create(fromVCS)
		if err != nil {
			t.Fatal(err)
		}
		if err := zip.CreateFromVCS(f, v, root, "HEAD", m.rel); err != nil {
			t.Fatal(err)
		}
		f.Close()
		want, err := dirhash.HashZip(fromVCS, dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dirhash.HashZip(published, dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: published zip hashes %s, the commit's %s", m.path, got, want)
		}
	}
	for _, file := range []string{"example.com/r/@v/list", "example.com/r/@v/v0.1.0.mod", "example.com/r/@v/v0.1.0.info", "example.com/r/sub/@v/v0.1.0.mod"} {
		if _, err := os.Stat(filepath.Join(proxy, file)); err != nil {
			t.Error(err)
		}
	}
}
