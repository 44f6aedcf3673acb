// Command redislock takes Redis locks from the shell: it runs a command
// while holding a lock (run), shows who holds locks (inspect) and
// demonstrates locks, fences and a stale holder on an embedded Redis (demo).
//
//	redislock run [flags] KEY -- COMMAND [ARGS...]
//	redislock run [flags] KEY -c 'COMMAND ARGS...'
//	redislock inspect [--json] KEY...
//	redislock demo
//	redislock --version
//
// The locks are those of the library github.com/redislock-go/redislock:
// "redislock run KEY" holds the same lock as Client.Obtain of KEY with the
// default prefix. run takes flock(1)'s flags where it has them: -n
// (--nonblock), -w SECONDS (--wait), -E CODE (--conflict-exit-code) and
// -c COMMAND (run by sh -c). The command runs in its own process group with
// redislock's environment less REDIS_URL, and with REDISLOCK_KEY,
// REDISLOCK_FENCE and REDISLOCK_TOKEN. The job is the command and every
// process it starts, whatever process group or session it moves to (on
// Linux, where redislock is their subreaper; elsewhere, the command's
// process group). The lock is renewed while the job runs; if the lock is
// lost, every process of the job gets SIGTERM, then SIGKILL after --grace,
// and run exits 125. Otherwise, once the command has exited and the rest of
// the job is stopped the same way, the lock is released and run exits with
// the command's own code. With --slots N it holds one of N slots of a semaphore instead. See
// "redislock run --help" and README.md for the flags and the table of exit
// codes.
//
// From the repository root, on a machine without Redis:
//
//	go -C cmd/redislock run . demo
package main
