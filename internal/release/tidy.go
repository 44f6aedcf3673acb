package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// tidyRounds bounds the rounds of tidy: a module's go.mod and go.sum are
// part of its zip, so a change in one module can change the hashes its
// dependents record, one level of the module graph per round.
const tidyRounds = 5

// tidy runs go mod tidy in every module outside the workspace (GOWORK=off),
// the repository's modules coming from the work tree published at the
// workspace's version into a temporary proxy, and every other module from
// the module cache or GOPROXY. Each round publishes the tree anew, on a
// new module cache (the user's never holds a version built from a work
// tree), and each module's go.sum lines of the repository's modules are
// dropped before its tidy, which records them again from the round's zips.
// Without sums, those lines are dropped after it too: only a release
// commit's tree has the hashes its tags will have.
func (ws *workspace) tidy(sums bool) error {
	tmp, err := os.MkdirTemp("", "redislock-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	upstream, err := goEnv("GOPROXY")
	if err != nil {
		return err
	}
	proxy := filepath.Join(tmp, "proxy")
	env := append(os.Environ(),
		"GOWORK=off",
		"GOPROXY="+fileURL(proxy)+","+fileURL(filepath.Join(cache, "cache", "download"))+","+upstream,
		"GONOSUMDB="+strings.Trim(os.Getenv("GONOSUMDB")+","+ws.modulePath(""), ","),
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -modcacherw"),
	)
	for round := 1; ; round++ {
		before, err := ws.modFiles()
		if err != nil {
			return err
		}
		// A module cache directory of its own each round: the go command
		// indexes a module's directory by its path (in GOCACHE), so a path
		// used again would be read from the index of the round before.
		modcache := filepath.Join(tmp, fmt.Sprintf("modcache%d", round))
		if err := os.RemoveAll(proxy); err != nil {
			return err
		}
		if err := ws.publish(proxy); err != nil {
			return err
		}
		for _, m := range ws.modules {
			if err := ws.dropSums(m); err != nil {
				return err
			}
			cmd := exec.Command("go", "mod", "tidy")
			cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = m.dir(ws.root), append(env, "GOMODCACHE="+modcache), os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("go mod tidy in ./%s: %v", m.rel, err)
			}
			if !sums {
				if err := ws.dropSums(m); err != nil {
					return err
				}
			}
		}
		after, err := ws.modFiles()
		if err != nil {
			return err
		}
		if maps.Equal(before, after) {
			return nil
		}
		if round == tidyRounds {
			return fmt.Errorf("go.mod and go.sum files still change after %d rounds of go mod tidy", round)
		}
	}
}

// modFiles returns the contents of every module's go.mod and go.sum.
func (ws *workspace) modFiles() (map[string]string, error) {
	files := map[string]string{}
	for _, m := range ws.modules {
		for _, name := range []string{"go.mod", "go.sum"} {
			file := filepath.Join(m.dir(ws.root), name)
			data, err := os.ReadFile(file)
			if err != nil && !os.IsNotExist(err) {
				return nil, err
			}
			files[file] = string(data)
		}
	}
	return files, nil
}

// dropSums removes the lines of the workspace's modules from m's go.sum.
func (ws *workspace) dropSums(m mod) error {
	file := filepath.Join(m.dir(ws.root), "go.sum")
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	var kept bytes.Buffer
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 0 && ws.has(f[0]) {
			continue
		}
		kept.WriteString(line)
	}
	return os.WriteFile(file, kept.Bytes(), 0o644)
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }
