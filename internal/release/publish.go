package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// publish writes every module of the workspace, at the workspace's version,
// into dir as a file-based module proxy serves it:
// ESCAPED-PATH/@v/{list,VERSION.info,VERSION.mod,VERSION.zip}.
func (ws *workspace) publish(dir string) error {
	files, err := ws.files()
	if err != nil {
		return err
	}
	for _, m := range ws.modules {
		if err := ws.publishModule(dir, m, files); err != nil {
			return fmt.Errorf("%s: %w", m.path, err)
		}
	}
	return nil
}

// files lists the work tree's files as a commit of it would hold them: the
// ones git tracks or does not ignore, that exist, slash-separated and
// relative to the root.
func (ws *workspace) files() ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = ws.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if fi, err := os.Lstat(filepath.Join(ws.root, filepath.FromSlash(f))); err == nil && fi.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

func (ws *workspace) publishModule(dir string, m mod, files []string) error {
	var zfs []zip.File
	license := false
	for _, f := range files {
		name := f
		if m.rel != "" {
			var ok bool
			if name, ok = strings.CutPrefix(f, m.rel+"/"); !ok {
				continue
			}
		}
		zfs = append(zfs, treeFile{name: name, file: filepath.Join(ws.root, filepath.FromSlash(f))})
		license = license || name == "LICENSE"
	}
	// As the go command does for a module in a subdirectory of a
	// repository: the root's LICENSE when the module has none.
	if root := filepath.Join(ws.root, "LICENSE"); !license && m.rel != "" && exists(root) {
		zfs = append(zfs, treeFile{name: "LICENSE", file: root})
	}
	esc, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	at := filepath.Join(dir, esc, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	v := ws.version
	var z bytes.Buffer
	if err := zip.Create(&z, module.Version{Path: m.path, Version: v}, zfs); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(m.dir(ws.root), "go.mod"))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	list, err := os.ReadFile(filepath.Join(at, "list"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	versions := strings.Fields(string(list))
	if !slices.Contains(versions, v) {
		versions = append(versions, v)
	}
	for name, data := range map[string][]byte{
		v + ".zip":  z.Bytes(),
		v + ".mod":  gomod,
		v + ".info": info,
		"list":      []byte(strings.Join(versions, "\n") + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

// treeFile is a file of the work tree, under its name in a module zip.
type treeFile struct{ name, file string }

func (f treeFile) Path() string                 { return f.name }
func (f treeFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.file) }
func (f treeFile) Open() (io.ReadCloser, error) { return os.Open(f.file) }
