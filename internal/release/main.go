// Command release is the repository's release machinery: it sets the one
// version at which the modules of the workspace (go.work) require each
// other, publishes the work tree's modules into a file-based module proxy,
// and tidies every module outside the workspace against that proxy. It is
// a module of its own, outside the workspace, so that golang.org/x/mod
// never enters the library's build; run it with GOWORK=off:
//
//	GOWORK=off go -C internal/release run . version VERSION
//	GOWORK=off go -C internal/release run . publish DIR
//	GOWORK=off go -C internal/release run . tidy [-sums]
//	GOWORK=off go -C internal/release run . tags
//
// version sets every require of a workspace module, in every go.mod, and
// the version of go.work's replace lines to VERSION. publish writes every
// workspace module at that version into DIR, in the layout of a module
// proxy (GOPROXY=file://DIR): the files of the work tree that git tracks or
// does not ignore, zipped by golang.org/x/mod/zip as the go command would
// zip the tagged commit. tidy runs go mod tidy in every module with
// GOWORK=off against the work tree so published, in rounds until nothing
// changes, and without -sums drops the go.sum lines of the repository's own
// modules (their hashes are only right for the tree of a release commit).
// tags prints the tag of every module at the version.
//
// release.sh, beside this file, uses it to prepare a release; .ci/install
// uses release.sh and publish to install the modules as a user would.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release version VERSION | publish DIR | tidy [-sums] | tags")
	}
	ws, err := loadWorkspace()
	if err != nil {
		return err
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "version":
		if len(args) != 1 {
			return fmt.Errorf("usage: release version VERSION")
		}
		return ws.setVersion(args[0])
	case "publish":
		if len(args) != 1 {
			return fmt.Errorf("usage: release publish DIR")
		}
		return ws.publish(args[0])
	case "tidy":
		fs := flag.NewFlagSet("tidy", flag.ContinueOnError)
		sums := fs.Bool("sums", false, "keep the go.sum lines of the repository's own modules (for a release commit)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return ws.tidy(*sums)
	case "tags":
		for _, t := range ws.tags() {
			fmt.Println(t)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}
