// Package scale measures redislock at scale against real redis-servers it
// starts itself: 100,000 locks held through one Client (goroutines, heap
// per lock, Redis calls per renewal round, renewal lag, loss reporting),
// and Obtain+Release with 64 workers on a 3-master Redis Cluster against
// one standalone server. It is a benchmark only:
//
//	go -C bench test -run '^$' -bench . -benchtime=1x ./scale
//
// REDISLOCK_SCALE_LOCKS sets the number of held locks (default 100000).
package scale
