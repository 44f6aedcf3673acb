package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/redislock-go/redislock/lease/backend"
)

// inspectTimeout bounds inspect's calls to Redis.
const inspectTimeout = 5 * time.Second

// lockInfo is one key in inspect --json.
type lockInfo struct {
	Key    string `json:"key"`
	Held   bool   `json:"held"`
	Holder string `json:"holder"` // the identity the grant recorded ("" if none)
	Fence  int64  `json:"fence"`  // 0 when not held
	TTLms  int64  `json:"ttl_ms"` // remaining lease in milliseconds; 0 when not held
	// Waiters is how many callers wait, as far as Redis knows: a lower
	// bound (a waiter of another client marks the lock: 1; fair queues
	// are counted).
	Waiters int `json:"waiters"`
}

func inspectCommand(c *conn) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect [flags] KEY...",
		Short: "Show who holds locks",
		Long: `Show, for each KEY, whether its lock is held, the holder identity its grant
recorded (host:pid for redislock run, or what the program gave WithHolder), the
current fence and the remaining lease, as Redis sees it now. The token is
never shown. In quorum mode a lock is held when a majority of the nodes hold
the same grant. Waiters is a lower bound: Redis knows that someone waits
(1) and counts the queue of fair locks, not the callers of other clients
that wait.

In the table, a key or holder that holds a control character (a newline,
ESC), another character that is not printable, invalid UTF-8, a quote or a
backslash is shown quoted as a Go string ("a\nb"), so that it cannot forge a
row or reach the terminal; --json shows it as JSON escapes it (invalid
UTF-8 becomes U+FFFD).

With --json, the output is one JSON array with an object per key:
  {"key": "...", "held": true, "holder": "...", "fence": 1733..., "ttl_ms": 8123, "waiters": 1}

Exit codes: 0, or 69 (Redis unreachable, an error reply, no quorum, or a key
that redislock did not write), 77 (Redis refused the user), 64 (bad
arguments).`,
		Example: `  redislock inspect nightly-report
  redislock inspect --json job-1 job-2 | jq '.[] | select(.held) | .holder'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("inspect needs at least one KEY")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, keys []string) error {
			return inspect(c, keys, asJSON, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func inspect(c *conn, keys []string, asJSON bool, w io.Writer) error {
	for _, k := range keys {
		if err := backend.CheckKey(k); err != nil {
			return exitWith(exitUsage, err)
		}
	}
	lc, closeClient, err := c.client()
	if err != nil {
		return err
	}
	defer closeClient()
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	infos := make([]lockInfo, 0, len(keys))
	for _, k := range keys {
		info, err := lc.Inspect(ctx, k)
		if err != nil {
			return fmt.Errorf("inspect %q on %s: %w", k, c.describe(), err)
		}
		infos = append(infos, lockInfo{Key: k, Held: info.Held, Holder: info.Holder, Fence: info.Fence, TTLms: info.TTL.Milliseconds(), Waiters: info.Waiters})
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(infos)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tHELD\tHOLDER\tFENCE\tTTL\tWAITERS")
	for _, i := range infos {
		if !i.Held {
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\t%d\n", cell(i.Key), i.Waiters)
			continue
		}
		holder := cell(i.Holder)
		if holder == "" {
			holder = "(none recorded)"
		}
		fmt.Fprintf(tw, "%s\tyes\t%s\t%d\t%v\t%d\n", cell(i.Key), holder, i.Fence, time.Duration(i.TTLms)*time.Millisecond, i.Waiters)
	}
	return tw.Flush()
}

// cell is s as the table shows it: as is, or quoted as a Go string when it
// holds a character that is not printable (a control character such as a
// newline or ESC, a format character such as a bidi override), invalid
// UTF-8, a quote or a backslash. A key or holder thus never forges a row
// or reaches the terminal as an escape sequence, and a quoted cell is
// never taken for one shown as is.
func cell(s string) string {
	if !utf8.ValidString(s) || strings.ContainsAny(s, `"\`) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
