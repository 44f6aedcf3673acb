package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version describes this build in one line: the module version from the
// build information (the tag for go install ...@vX.Y.Z, "(devel)" for a
// build in a work tree), the commit and its time where the build recorded
// them (a build in a git work tree, unless -buildvcs=false), and the Go
// version and platform.
func version() string {
	v, goVersion := "(unknown)", runtime.Version()
	var commit []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		goVersion = bi.GoVersion
		var rev, at, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			commit = append(commit, "commit "+rev)
			if at != "" {
				commit = append(commit, at)
			}
			if modified == "true" {
				commit = append(commit, "modified")
			}
		}
	}
	s := "redislock " + v
	if len(commit) > 0 {
		s += ", " + strings.Join(commit, ", ")
	}
	return s + ", " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}
