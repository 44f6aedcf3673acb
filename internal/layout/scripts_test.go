package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxScriptLines is the most lines a Lua file of scripts/ may have.
const maxScriptLines = 100

// preludes are the Lua files that are no script of their own: functions
// and code that internal/script puts in the scripts.
var preludes = map[string]bool{"fence.lua": true, "record.lua": true, "semaphore_prelude.lua": true}

// byHand matches Lua code that decodes a lock key's value (v) or its
// latest releases (rel) itself: only scripts/record.lua may. A grant test
// by prefix, string.sub(v, 1, #tok + 1) == tok .. ':', is record.lua's
// documented property, not decoding.
var byHand = regexp.MustCompile(`string\.(match|gmatch)\(\s*v\b|string\.find\(\s*v\s*,\s*':'|string\.(byte|sub)\(\s*v\s*,\s*-1\s*\)|==\s*'~:'|'~:'\s*,\s*1\s*,\s*2|string\.find\(\s*(r|rel)\s*\.\.`)

// Every script is at most maxScriptLines lines and starts with its header,
// which names its KEYS, its ARGV (if it reads any) and its replies; no
// script but record.lua decodes the lock key's value.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("../../scripts/*.lua")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src, name := string(b), filepath.Base(f)
		base := strings.TrimSuffix(name, ".lua")
		assert.LessOrEqual(t, strings.Count(src, "\n"), maxScriptLines, "%s: lines", name)
		header, code := split(src)
		assert.True(t, strings.HasPrefix(header, "-- "+base+":") || strings.HasPrefix(header, "-- "+name+":"), "%s: the header names the script first: %.40q", name, header)
		if !preludes[name] {
			assert.Contains(t, header, "KEYS", "%s: the header names the KEYS", name)
			assert.Regexp(t, `(?i)repl(y|ies)`, header, "%s: the header names the replies", name)
			if strings.Contains(code, "ARGV") {
				assert.Contains(t, header, "ARGV", "%s: the header names the ARGV", name)
			}
		}
		if name != "record.lua" {
			assert.Empty(t, byHand.FindAllString(code, -1), "%s decodes a lock key's value by hand: scripts/record.lua's job", name)
		}
	}
}

// The by-hand check can fail: it finds the decoding that scripts did
// before record.lua.
func TestByHandFails(t *testing.T) {
	for _, code := range []string{
		`tok, f, r = string.match(v, '^([^:]*):(%d+):([^:]*)')`,
		`local i = string.find(v, ':', 1, true)`,
		`if string.byte(v, -1) == 42 then`,
		`if string.sub(v, -1) ~= '*' then`,
		`if string.sub(redis.call('GET', KEYS[1]) or '~:', 1, 2) == '~:' then`,
		`if string.find(r .. ' ', ' ' .. string.sub(tok, 1, 12) .. ' ', 1, true) then`,
	} {
		assert.Regexp(t, byHand, code)
	}
	assert.NotRegexp(t, byHand, `if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then`)
}

// split returns a Lua source's header (its first comment lines) and its
// code, comments left out.
func split(src string) (header, code string) {
	var h, c strings.Builder
	inHeader := true
	for line := range strings.Lines(src) {
		trimmed := strings.TrimSpace(line)
		if inHeader && strings.HasPrefix(trimmed, "--") {
			h.WriteString(line)
			continue
		}
		inHeader = false
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] + "\n"
		}
		c.WriteString(line)
	}
	return h.String(), c.String()
}

// No Go file but internal/script's value.go decodes a lock key's value (a
// released record begins "~:"): Inspect, the chaos suite and the tools
// call script.ParseValue. Tests that read keys may still check by hand.
func TestValueDecodedOnce(t *testing.T) {
	var found []string
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && (strings.Contains(string(b), `"~:"`) || strings.Contains(string(b), "releasedToken")) {
			found = append(found, filepath.ToSlash(path))
		}
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"../../internal/script/value.go"}, found)
}
