package script

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/redislock-go/redislock/scripts"
)

// withPrelude is s with its preludes: on each line "-- record.lua",
// record.lua's decoding of v; and the fence functions s calls
// (scripts/fence.lua), with those they call in turn, in fence.lua's order,
// on its first line "-- fence.lua", else in front, except those that a
// line "-- fence.lua: f, g" names: they go on that line (local to its
// block), with those only they call. A script runs its whole chunk on
// every call, making each function it defines anew (a closure each, about
// a twentieth of a refresh): it gets only those it calls, and those a path
// seldom takes are made on that path.
func withPrelude(s scripts.Script) string {
	src := s.Source()
	code := uncommented(src)
	main := -1                // where the fence functions go
	named := map[string]int{} // where a line names a function to go
	var records []int         // where record.lua goes
	for i := 0; i < len(src); {
		line, _, _ := strings.Cut(src[i:], "\n")
		end := min(i+len(line)+1, len(src))
		switch line = strings.TrimSpace(line); {
		case line == "-- record.lua":
			records = append(records, end)
		case line == "-- fence.lua":
			if main < 0 {
				main = end
			}
		case strings.HasPrefix(line, "-- fence.lua: ") || strings.HasPrefix(line, "-- record.lua: "):
			_, list, _ := strings.Cut(line, ": ")
			for _, f := range strings.Split(list, ",") {
				named[strings.TrimSpace(f)] = end
			}
		}
		i = end
	}
	main = max(main, 0)
	at := make(map[int][]string) // the functions that go at each place
	where := make(map[string]int)
	for i := len(fences) - 1; i >= 0; i-- { // a function calls only those before it
		f := fences[i]
		places := map[int]bool{}
		if f.call.MatchString(code) {
			if p, ok := named[f.name]; ok {
				places[p] = true
			} else {
				places[main] = true
			}
		}
		for _, g := range fences[i+1:] {
			if p, ok := where[g.name]; ok && slices.Contains(g.calls, f.name) {
				places[p] = true
			}
		}
		if len(places) == 0 {
			continue
		}
		where[f.name] = main
		if len(places) == 1 {
			for p := range places {
				where[f.name] = p
			}
		}
		at[where[f.name]] = append([]string{f.body}, at[where[f.name]]...)
	}
	for _, p := range records {
		at[p] = append(at[p], recordBlock)
	}
	places := slices.Sorted(maps.Keys(at))
	var b strings.Builder
	last := 0
	for _, p := range places {
		b.WriteString(src[last:p])
		last = p
		for _, body := range at[p] {
			b.WriteString(body)
		}
	}
	b.WriteString(src[last:])
	return b.String()
}

// recordBlock is record.lua's decoding: without its header, before its
// functions.
var recordBlock = func() string {
	src := scripts.RecordPrelude.Source()
	src = src[strings.Index(src, "\nlocal ")+1:]
	return src[:strings.Index(src, "\nlocal function ")+1]
}()

// preludeFunc is one function of the prelude: its name and its source,
// from its "local function" line to the next one's.
type preludeFunc struct {
	name, body string
	calls      []string       // the prelude functions it calls
	call       *regexp.Regexp // a call of it
}

// fences is fence.lua's functions and record.lua's, in order.
var fences = split(scripts.FencePrelude.Source(), scripts.RecordPrelude.Source())

var funcLine = regexp.MustCompile(`(?m)^local function (\w+)\(`)

// split cuts sources into their functions; what comes before a source's
// first function (its header) is left out.
func split(srcs ...string) []preludeFunc {
	var fs []preludeFunc
	for _, src := range srcs {
		at := funcLine.FindAllStringSubmatchIndex(src, -1)
		for i, m := range at {
			end := len(src)
			if i+1 < len(at) {
				end = at[i+1][0]
			}
			body := src[m[0]:end]
			if !strings.HasSuffix(body, "\n") {
				body += "\n"
			}
			fs = append(fs, preludeFunc{name: src[m[2]:m[3]], body: body})
		}
	}
	for i := range fs {
		fs[i].call = regexp.MustCompile(`(?:^|[^\w.:])(` + fs[i].name + `)\s*\(`)
	}
	for i := range fs {
		body := uncommented(strings.TrimPrefix(fs[i].body, "local function "+fs[i].name))
		for _, f := range fs[:i] {
			if f.call.MatchString(body) {
				fs[i].calls = append(fs[i].calls, f.name)
			}
		}
	}
	return fs
}

// uncommented is src with its comments blanked out, in place.
func uncommented(src string) string {
	b := []byte(src)
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '-' && b[i+1] == '-' {
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		}
	}
	return string(b)
}
