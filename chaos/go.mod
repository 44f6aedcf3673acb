module github.com/redislock-go/redislock/chaos

go 1.26.0

replace github.com/redislock-go/redislock => ..

require (
	github.com/anishathalye/porcupine v1.3.1
	golang.org/x/sys v0.48.0
)
