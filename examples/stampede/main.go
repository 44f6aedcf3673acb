// Command stampede serves a slow endpoint through a stampede.Group: however
// many requests arrive for a cold entry, on however many servers, the slow
// backend is asked once.
//
//	go run ./examples/stampede                          # embedded miniredis: demo, then exit
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/stampede # your Redis
//	go run ./examples/stampede -listen 127.0.0.1:8080   # serve until interrupted
//
// The demo starts two servers (two processes of a fleet, each with its own
// Redis connections), sends 100 concurrent requests for one cold item,
// split between them, and prints how often the backend was asked.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/stampede"
)

// backend is the slow service the cache protects.
type backend struct{ calls atomic.Int32 }

// price looks an item up: 200 ms per call, a miss for unknown items.
func (b *backend) price(ctx context.Context, item int) ([]byte, error) {
	b.calls.Add(1)
	select {
	case <-time.After(200 * time.Millisecond): // the slow query
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if item <= 0 || item > 1000 {
		return nil, fmt.Errorf("item %d: %w", item, stampede.ErrMissing)
	}
	return []byte(fmt.Sprintf("%d.99\n", item)), nil
}

// server is one process of the fleet.
type server struct {
	group   *stampede.Group
	backend *backend
}

func newServer(rdb redis.UniversalClient, b *backend) (*server, *redislock.Client, error) {
	client := redislock.New(rdb, redislock.WithPrefix("example:"))
	g, err := stampede.New(client.Locker(), client.Store(),
		stampede.WithNegativeTTL(10*time.Second), // unknown items: remembered for 10 s
		stampede.WithEarlyRefresh(5*time.Second), // refreshed in the last 5 s of 30
		stampede.WithErrorHandler(func(key string, err error) { log.Printf("%s: %v", key, err) }))
	if err != nil {
		return nil, nil, err
	}
	return &server{group: g, backend: b}, client, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	item, err := strconv.Atoi(r.URL.Query().Get("item"))
	if err != nil {
		http.Error(w, "item must be a number", http.StatusBadRequest)
		return
	}
	v, err := s.group.Do(r.Context(), "price:"+strconv.Itoa(item), 30*time.Second, func(ctx context.Context) ([]byte, error) {
		return s.backend.price(ctx, item)
	})
	switch {
	case errors.Is(err, stampede.ErrMissing):
		http.Error(w, "no such item", http.StatusNotFound)
	case err != nil && r.Context().Err() != nil:
		return // the client went away; the fill goes on for the others
	case err != nil:
		http.Error(w, "backend unavailable", http.StatusServiceUnavailable)
		log.Print(err)
	default:
		_, _ = w.Write(v)
	}
}

func main() {
	listen := flag.String("listen", "", "serve on this address until interrupted, instead of the demo")
	flag.Parse()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		addr = m.Addr()
		fmt.Println("REDIS_ADDR not set: using an embedded miniredis at", addr)
	}
	b := &backend{}
	if *listen != "" {
		serve(addr, *listen, b)
		return
	}
	if err := demo(addr, b); err != nil {
		log.Fatal(err)
	}
}

func serve(addr, listen string, b *backend) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	s, client, err := newServer(rdb, b)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	defer s.group.Close()
	srv := &http.Server{Addr: listen, Handler: s}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Printf("serving on http://%s/?item=42\n", listen)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// demo runs two servers on one Redis and a burst of requests against them.
func demo(addr string, b *backend) error {
	var urls []string
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		s, client, err := newServer(rdb, b)
		if err != nil {
			return err
		}
		defer client.Close()
		defer s.group.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: s}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	get := func(url string) (int, string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	burst := func(item, n int) (map[string]int, error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr error
		seen := map[string]int{}
		for i := range n {
			wg.Go(func() {
				code, body, err := get(fmt.Sprintf("%s/?item=%d", urls[i%len(urls)], item))
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				seen[fmt.Sprintf("%d %q", code, body)]++
			})
		}
		wg.Wait()
		return seen, firstErr
	}
	for _, item := range []int{42, 0} {
		before := b.calls.Load()
		seen, err := burst(item, 100)
		if err != nil {
			return err
		}
		fmt.Printf("100 concurrent requests for item %d on 2 servers: backend asked %d time(s); responses %v\n",
			item, b.calls.Load()-before, seen)
	}
	before := b.calls.Load()
	if _, err := burst(42, 100); err != nil {
		return err
	}
	fmt.Printf("100 more requests for item 42: backend asked %d time(s) (cached)\n", b.calls.Load()-before)
	return nil
}
