package script

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Status is the outcome of an obtain script.
type Status int8

// The outcomes of obtain.lua and fair_obtain.lua.
const (
	Granted     Status = 1  // the grant is the caller's (also on a replay)
	Held        Status = 0  // another grant holds the lock
	LowProposal Status = -1 // quorum: the proposed fence is not above the node's counter
)

// NoExpiry is the PTTL of a lock key without expiry (not written by
// redislock: it would block the lock forever).
const NoExpiry = -1

// ObtainReply is an obtain script's answer.
type ObtainReply struct {
	Status  Status
	Fence   int64 // Granted: the grant's fence
	PTTL    int64 // Held: the holder's remaining lease in ms (NoExpiry: none); fair mode: or the wait for the queue's head
	Counter int64 // LowProposal: the node's fence counter
	// Released reports, for a handoff, whether the grant handed over was
	// released (by this run or an earlier run of the same request).
	Released bool
}

// Obtain is the request of obtain.lua.
type Obtain struct {
	Keys       []string // {lock, fence}; with From, {lock, fence, rel}
	Token      any      // the new grant's token (a string, boxed once)
	TTL        int64    // lease in ms
	Proposal   int64    // quorum: the proposed fence; 0: mint it on the node
	CounterTTL any      // fence counter (and released tokens) TTL in ms, boxed once
	Holder     any      // holder identity (a string, "" for none), boxed once
	From       any      // handoff: the token of the grant handed over; nil: none
}

// Run sends the request (obtain.lua).
func (o Obtain) Run(ctx context.Context, rdb redis.Scripter) (ObtainReply, error) {
	var cmd *redis.Cmd
	if o.From != nil {
		cmd = obtain.Run(ctx, rdb, o.Keys, o.Token, o.TTL, o.Proposal, o.CounterTTL, o.Holder, o.From)
	} else {
		cmd = obtain.Run(ctx, rdb, o.Keys, o.Token, o.TTL, o.Proposal, o.CounterTTL, o.Holder)
	}
	var v [3]int64
	res, err := cmd.Slice()
	n, err := ints(v[:], "obtain", res, err)
	if err != nil {
		return ObtainReply{}, err
	}
	if n != 2 && (o.From == nil || n != 3) {
		return ObtainReply{}, unexpected("obtain", slices.Clone(v[:n]))
	}
	r, err := obtainReply("obtain", v[0], v[1])
	r.Released = n == 3 && v[2] == 1
	return r, err
}

// FairObtain is the request of fair_obtain.lua.
type FairObtain struct {
	Keys       []string // {lock, fence, queue, qexp}
	Token      any
	TTL        int64
	CounterTTL any
	QueueTTL   int64  // a queue entry's lifetime in ms
	Ticket     string // the waiter's place in the queue
	Holder     any
}

// Run sends the request (fair_obtain.lua). A Held reply's PTTL is the
// holder's lease, or, when the lock is free but due to an earlier waiter,
// the time until that waiter's queue entry expires.
func (o FairObtain) Run(ctx context.Context, rdb redis.Scripter) (ObtainReply, error) {
	var v [2]int64
	res, err := fairObtain.Run(ctx, rdb, o.Keys, o.Token, o.TTL, o.CounterTTL, o.QueueTTL, o.Ticket, o.Holder).Slice()
	n, err := ints(v[:], "fair_obtain", res, err)
	if err != nil {
		return ObtainReply{}, err
	}
	if n != 2 {
		return ObtainReply{}, unexpected("fair_obtain", slices.Clone(v[:n]))
	}
	return obtainReply("fair_obtain", v[0], v[1])
}

func obtainReply(name string, status, n int64) (ObtainReply, error) {
	switch Status(status) {
	case Granted:
		return ObtainReply{Status: Granted, Fence: n}, nil
	case Held:
		return ObtainReply{Status: Held, PTTL: n}, nil
	case LowProposal:
		return ObtainReply{Status: LowProposal, Counter: n}, nil
	}
	return ObtainReply{}, unexpected(name, fmt.Sprint(status, n))
}
