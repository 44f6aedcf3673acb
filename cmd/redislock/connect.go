package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/redislock-go/redislock"
)

// Connection defaults.
const (
	defaultAddr   = "127.0.0.1:6379"
	defaultMaster = "mymaster"
	dialTimeout   = 3 * time.Second
	ioTimeout     = 3 * time.Second
	// dialAttempts is one: go-redis' default of 5 dial attempts per
	// connection, each command retried 3 times, made a Redis that is down
	// take 3.4 s to report; the command reports it at once (exit 69).
	dialAttempts = 1
)

// conn holds the connection flags shared by every subcommand.
type conn struct {
	addr     string
	quorum   []string
	sentinel string
	cacert   string
	cert     string
	key      string
	prefix   string
}

func (c *conn) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "", "the Redis: `ADDRESS` is host:port, or a redis:// or rediss:// (TLS) URL with user, password and db\n(default: $REDIS_URL, else "+defaultAddr+")")
	fs.StringSliceVar(&c.quorum, "quorum", nil, "quorum mode: independent Redis masters `ADDR,ADDR,...` (each host:port or a URL);\na lock is held on a majority of them")
	fs.StringVar(&c.sentinel, "sentinel", "", "use Redis Sentinel: the `MASTER` name; --addr (or $REDIS_URL) then names the Sentinels,\nas host:port,host:port or a go-redis failover URL")
	fs.StringVar(&c.cacert, "tls-ca", "", "TLS: CA certificate `FILE` to verify the server with (rediss:// only)")
	fs.StringVar(&c.cert, "tls-cert", "", "TLS: client certificate `FILE` (rediss:// only; with --tls-key)")
	fs.StringVar(&c.key, "tls-key", "", "TLS: client private key `FILE` (rediss:// only; with --tls-cert)")
	fs.StringVar(&c.prefix, "prefix", redislock.DefaultPrefix, "namespace of the Redis keys redislock writes (the library's WithPrefix)")
}

// given reports whether the user named a Redis to use (for demo, which
// otherwise runs on an embedded one).
func (c *conn) given() bool {
	return c.addr != "" || len(c.quorum) > 0 || c.sentinel != "" || os.Getenv("REDIS_URL") != ""
}

// describe names where the connection goes, without credentials.
func (c *conn) describe() string {
	switch {
	case len(c.quorum) > 0:
		hosts := make([]string, len(c.quorum))
		for i, a := range c.quorum {
			hosts[i] = redact(a)
		}
		return "quorum of " + strings.Join(hosts, ",")
	case c.sentinel != "":
		return "Sentinel master " + c.sentinel + " via " + redact(c.address())
	}
	return redact(c.address())
}

func (c *conn) address() string {
	switch {
	case c.addr != "":
		return c.addr
	case os.Getenv("REDIS_URL") != "":
		return os.Getenv("REDIS_URL")
	}
	return defaultAddr
}

// redact drops the user information of a URL.
func redact(a string) string {
	if i := strings.Index(a, "://"); i >= 0 {
		if j := strings.LastIndex(a, "@"); j > i {
			return a[:i+3] + a[j+1:]
		}
	}
	return a
}

// clients returns the go-redis clients the flags name (one, or the quorum's
// nodes) and whether they are a quorum. The caller closes them.
func (c *conn) clients() (rdbs []redis.UniversalClient, quorum bool, err error) {
	tlsFiles := c.cacert != "" || c.cert != "" || c.key != ""
	if (c.cert == "") != (c.key == "") {
		return nil, false, usageError("--tls-cert and --tls-key go together")
	}
	switch {
	case len(c.quorum) > 0 && (c.addr != "" || c.sentinel != ""):
		return nil, false, usageError("--quorum excludes --addr and --sentinel")
	case len(c.quorum) == 1:
		return nil, false, usageError("--quorum needs at least two addresses (for one Redis, use --addr)")
	case len(c.quorum) > 0:
		for _, a := range c.quorum {
			o, err := c.options(a, tlsFiles)
			if err != nil {
				closeAll(rdbs)
				return nil, false, err
			}
			rdbs = append(rdbs, redis.NewClient(o))
		}
		return rdbs, true, nil
	case c.sentinel != "":
		o, err := c.failover(tlsFiles)
		if err != nil {
			return nil, false, err
		}
		return []redis.UniversalClient{redis.NewFailoverClient(o)}, false, nil
	}
	o, err := c.options(c.address(), tlsFiles)
	if err != nil {
		return nil, false, err
	}
	return []redis.UniversalClient{redis.NewClient(o)}, false, nil
}

func closeAll(rdbs []redis.UniversalClient) {
	for _, r := range rdbs {
		_ = r.Close()
	}
}

// options parses one address: a URL (redis://, rediss://, unix://) or
// host:port.
func (c *conn) options(a string, tlsFiles bool) (*redis.Options, error) {
	var o *redis.Options
	if strings.Contains(a, "://") {
		var err error
		if o, err = redis.ParseURL(a); err != nil {
			return nil, usageError("address %q: %v", redact(a), err)
		}
	} else {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, usageError("address %q: want host:port or a redis:// URL", a)
		}
		o = &redis.Options{Addr: a}
	}
	if tlsFiles && o.TLSConfig == nil {
		return nil, usageError("--tls-ca, --tls-cert and --tls-key need a rediss:// address (%s)", redact(a))
	}
	if err := c.tls(o.TLSConfig); err != nil {
		return nil, err
	}
	timeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
	o.DialerRetries = dialAttempts
	o.ContextTimeoutEnabled = true
	return o, nil
}

// failover parses the Sentinel addresses: a failover URL, or a list of
// host:port.
func (c *conn) failover(tlsFiles bool) (*redis.FailoverOptions, error) {
	a := c.address()
	var o *redis.FailoverOptions
	if strings.Contains(a, "://") {
		var err error
		if o, err = redis.ParseFailoverURL(a); err != nil {
			return nil, usageError("Sentinel address %q: %v", redact(a), err)
		}
	} else {
		o = &redis.FailoverOptions{}
		for _, s := range strings.Split(a, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(s)); err != nil {
				return nil, usageError("Sentinel address %q: want host:port,host:port or a redis:// URL", s)
			}
			o.SentinelAddrs = append(o.SentinelAddrs, strings.TrimSpace(s))
		}
	}
	o.MasterName = c.sentinel
	if tlsFiles && o.TLSConfig == nil {
		return nil, usageError("--tls-ca, --tls-cert and --tls-key need a rediss:// address")
	}
	if err := c.tls(o.TLSConfig); err != nil {
		return nil, err
	}
	timeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
	o.DialerRetries = dialAttempts
	o.ContextTimeoutEnabled = true
	return o, nil
}

func timeouts(dial, read, write *time.Duration) {
	if *dial == 0 {
		*dial = dialTimeout
	}
	if *read == 0 {
		*read = ioTimeout
	}
	if *write == 0 {
		*write = ioTimeout
	}
}

// tls adds the CA and client certificate files to cfg (nil: no TLS).
func (c *conn) tls(cfg *tls.Config) error {
	if cfg == nil {
		return nil
	}
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return usageError("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return usageError("--tls-ca %s: no PEM certificate in it", c.cacert)
		}
		cfg.RootCAs = pool
	}
	if c.cert != "" {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return usageError("--tls-cert/--tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return nil
}

// client returns a redislock Client on the flags' Redis, with opts, and a
// function that closes it and its redis clients.
func (c *conn) client(opts ...redislock.ClientOption) (*redislock.Client, func(), error) {
	rdbs, quorum, err := c.clients()
	if err != nil {
		return nil, nil, err
	}
	opts = append([]redislock.ClientOption{redislock.WithPrefix(c.prefix)}, opts...)
	var lc *redislock.Client
	if quorum {
		if lc, err = redislock.NewQuorum(rdbs, opts...); err != nil {
			closeAll(rdbs)
			return nil, nil, err
		}
	} else {
		lc = redislock.New(rdbs[0], opts...)
	}
	return lc, func() { _ = lc.Close(); closeAll(rdbs) }, nil
}

// defaultHolder is "host:pid".
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}
