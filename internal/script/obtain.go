package script

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Status is the outcome of an obtain script.
type Status int8

// The outcomes of obtain.lua, propose.lua and fair_obtain.lua.
const (
	Granted     Status = 1  // the grant is the caller's (also on a replay)
	Held        Status = 0  // another grant holds the lock
	LowProposal Status = -1 // quorum: the proposed fence is not above the key's last fence
)

// NoExpiry is the PTTL of a lock key without expiry (not written by
// redislock: it would block the lock forever).
const NoExpiry = -1

// lowProposal is the first element of propose.lua's reply to a proposal
// that was not above the key's last fence: {lowProposal, last}.
const lowProposal = -1

// ObtainReply is an obtain script's answer.
type ObtainReply struct {
	Status  Status
	Fence   int64 // Granted: the grant's fence
	PTTL    int64 // Held: the holder's remaining lease in ms (NoExpiry: none); fair mode: or the wait for the queue's head
	Counter int64 // LowProposal: the key's last fence
}

// Obtain is the request of obtain.lua, or of propose.lua with a Proposal.
type Obtain struct {
	Keys     []any // {lock}, boxed
	Token    any   // the new grant's token (a string, boxed once)
	TTL      any   // lease in ms (an int64, boxed once)
	Proposal int64 // quorum: the proposed fence; 0: mint it on the node
	Holder   any   // holder identity (a string, "" for none), boxed once; nil: none
}

// Run sends the request: obtain.lua with the token and TTL, and the
// holder only when there is one (each argument costs the server and the
// client); propose.lua when there is a Proposal.
func (o Obtain) Run(ctx context.Context, rdb redis.Scripter) (ObtainReply, error) {
	if o.Proposal == 0 {
		// The reply is one integer.
		a := append(obtainFast.args(o.Keys, 3), o.Token, o.TTL)
		if o.Holder != nil && o.Holder != "" {
			a = append(a, o.Holder)
		}
		n, err := obtainFast.runInt(ctx, rdb, len(o.Keys), a)
		if err != nil {
			return ObtainReply{}, err
		}
		return obtainInt(n), nil
	}
	holder := o.Holder
	if holder == nil {
		holder = ""
	}
	a := append(proposeFast.args(o.Keys, 4), o.Token, o.TTL, o.Proposal, holder)
	res, err := proposeFast.run(ctx, rdb, len(o.Keys), a)
	if err != nil {
		return ObtainReply{}, err
	}
	if n, ok := intOf(res); ok {
		return obtainInt(n), nil
	}
	var v [2]int64
	arr, _ := res.([]any)
	if n, err := ints(v[:], "propose", arr, nil); err != nil || n != 2 || v[0] != lowProposal {
		return ObtainReply{}, unexpected("propose", res)
	}
	return ObtainReply{Status: LowProposal, Counter: v[1]}, nil
}

// obtainInt reads obtain.lua's integer reply: a fence > 0 granted, else
// -(PTTL + 1) of the holder.
func obtainInt(n int64) ObtainReply {
	if n > 0 {
		return ObtainReply{Status: Granted, Fence: n}
	}
	return ObtainReply{Status: Held, PTTL: -n - 1}
}

// FairObtain is the request of fair_obtain.lua.
type FairObtain struct {
	Keys     []string // {lock, queue, qexp}
	Token    any
	TTL      any    // lease in ms (an int64, boxed once)
	QueueTTL int64  // a queue entry's lifetime in ms
	Ticket   string // the waiter's place in the queue
	Holder   any
}

// Run sends the request (fair_obtain.lua). A Held reply's PTTL is the
// holder's lease, or, when the lock is free but due to an earlier waiter,
// the time until that waiter's queue entry expires.
func (o FairObtain) Run(ctx context.Context, rdb redis.Scripter) (ObtainReply, error) {
	var v [2]int64
	res, err := fairObtain.Run(ctx, rdb, o.Keys, o.Token, o.TTL, o.QueueTTL, o.Ticket, o.Holder).Slice()
	n, err := ints(v[:], "fair_obtain", res, err)
	if err != nil {
		return ObtainReply{}, err
	}
	if n != 2 {
		return ObtainReply{}, unexpected("fair_obtain", res)
	}
	switch Status(v[0]) {
	case Granted:
		return ObtainReply{Status: Granted, Fence: v[1]}, nil
	case Held:
		return ObtainReply{Status: Held, PTTL: v[1]}, nil
	}
	return ObtainReply{}, unexpected("fair_obtain", fmt.Sprint(v))
}
