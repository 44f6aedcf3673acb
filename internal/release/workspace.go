package main

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// workspace is the repository's go.work: its modules and the version at
// which they require each other.
type workspace struct {
	root    string // the directory of go.work
	modules []mod
	version string // of go.work's replace lines, one for every module
	work    *modfile.WorkFile
}

// mod is one module of the workspace.
type mod struct {
	path string // module path
	rel  string // directory, relative to the root, slash-separated ("" for the root)
}

func (m mod) dir(root string) string { return filepath.Join(root, filepath.FromSlash(m.rel)) }

// loadWorkspace reads the go.work of the nearest directory above the
// working directory that has one.
func loadWorkspace() (*workspace, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no go.work in the working directory or above")
		}
		dir = parent
	}
	file := filepath.Join(dir, "go.work")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork(file, data, nil)
	if err != nil {
		return nil, err
	}
	ws := &workspace{root: dir, work: wf}
	for _, u := range wf.Use {
		rel := path.Clean(filepath.ToSlash(u.Path))
		if rel == "." {
			rel = ""
		}
		gomod := filepath.Join(dir, filepath.FromSlash(rel), "go.mod")
		data, err := os.ReadFile(gomod)
		if err != nil {
			return nil, err
		}
		p := modfile.ModulePath(data)
		if p == "" {
			return nil, fmt.Errorf("%s: no module line", gomod)
		}
		ws.modules = append(ws.modules, mod{path: p, rel: rel})
	}
	base := ws.modulePath("")
	if base == "" {
		return nil, fmt.Errorf("go.work: the directory of go.work is not one of its modules")
	}
	for _, m := range ws.modules {
		// A module's tag is its directory and the version: that needs the
		// module path to be the root's and the directory.
		if want := strings.TrimSuffix(base+"/"+m.rel, "/"); m.path != want {
			return nil, fmt.Errorf("module %s in ./%s: want the path %s (the root module's and the directory), for its tags", m.path, m.rel, want)
		}
		r := ws.replace(m.path)
		if r == nil {
			return nil, fmt.Errorf("go.work: no replace line for %s (want %s VERSION => ./%s)", m.path, m.path, m.rel)
		}
		if ws.version == "" {
			ws.version = r.Old.Version
		}
		if r.Old.Version != ws.version {
			return nil, fmt.Errorf("go.work: %s is replaced at %s, the others at %s: one version for all", m.path, r.Old.Version, ws.version)
		}
	}
	return ws, nil
}

// replace returns go.work's replace line for the module path p, or nil.
func (ws *workspace) replace(p string) *modfile.Replace {
	for _, r := range ws.work.Replace {
		if r.Old.Path == p && r.Old.Version != "" {
			return r
		}
	}
	return nil
}

// modulePath returns the path of the module in directory rel, or "".
func (ws *workspace) modulePath(rel string) string {
	for _, m := range ws.modules {
		if m.rel == rel {
			return m.path
		}
	}
	return ""
}

func (ws *workspace) has(p string) bool {
	for _, m := range ws.modules {
		if m.path == p {
			return true
		}
	}
	return false
}

// setVersion makes every go.mod of the work tree (the workspace's, and any
// other, such as a test-only module outside the workspace) require the
// workspace's modules at v, and go.work replace them at v.
func (ws *workspace) setVersion(v string) error {
	for _, m := range ws.modules {
		if err := module.Check(m.path, v); err != nil {
			return err
		}
	}
	files, err := ws.files()
	if err != nil {
		return err
	}
	for _, name := range files {
		if path.Base(name) != "go.mod" {
			continue
		}
		file := filepath.Join(ws.root, filepath.FromSlash(name))
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(file, data, nil)
		if err != nil {
			return err
		}
		for _, r := range f.Require {
			if ws.has(r.Mod.Path) {
				if err := f.AddRequire(r.Mod.Path, v); err != nil {
					return err
				}
			}
		}
		f.Cleanup()
		if out := modfile.Format(f.Syntax); !bytes.Equal(out, data) {
			if err := os.WriteFile(file, out, 0o644); err != nil {
				return err
			}
		}
	}
	for _, m := range ws.modules {
		r := ws.replace(m.path)
		r.Old.Version = v
		i := 2 // replace PATH VERSION => DIR
		if r.Syntax.InBlock {
			i = 1 // PATH VERSION => DIR
		}
		r.Syntax.Token[i] = v
	}
	ws.version = v
	return os.WriteFile(filepath.Join(ws.root, "go.work"), modfile.Format(ws.work.Syntax), 0o644)
}

// tags returns the tag of every module at the workspace's version: VERSION
// for the root, DIR/VERSION for the others.
func (ws *workspace) tags() []string {
	var tags []string
	for _, m := range ws.modules {
		tags = append(tags, strings.TrimPrefix(m.rel+"/"+ws.version, "/"))
	}
	return tags
}
