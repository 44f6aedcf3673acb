package lockbench

import (
	"fmt"

	"github.com/redislock-go/redislock/internal/redisproc"
)

// spawnRedis starts n redis-server processes without persistence on free
// loopback ports (they die with the tool, even if it crashes). On error,
// the ones already started are stopped.
func spawnRedis(n int) ([]*redisproc.Server, error) {
	bin, err := lookRedisServer()
	if err != nil {
		return nil, fmt.Errorf("lockbench: --spawn needs redis-server on PATH: %w", err)
	}
	var procs []*redisproc.Server
	for range n {
		p, err := redisproc.Start(redisproc.Config{Bin: bin})
		if err != nil {
			stopRedis(procs)
			return nil, fmt.Errorf("lockbench: %w", err)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// stopRedis kills the servers and removes their data directories.
func stopRedis(procs []*redisproc.Server) {
	for _, p := range procs {
		p.Close()
	}
}

func lookRedisServer() (string, error) { return redisproc.LookPath("redis-server") }
