package dedup

import (
	"fmt"

	"github.com/redislock-go/redislock/lease"
)

// A record is a job's outcome in the Store: one kind byte, then the job's
// value (done) or its error's message (failed). The record's fence is the
// run's.
const (
	kindDone   byte = 'D'
	kindFailed byte = 'F'
)

func encodeDone(value []byte) []byte {
	return append([]byte{kindDone}, value...)
}

func encodeFailed(err error) []byte {
	return append([]byte{kindFailed}, err.Error()...)
}

// outcome turns the record of job id into what Do returns for it.
func outcome(id string, r lease.Record) (Result, error) {
	if len(r.Value) == 0 {
		return Result{}, fmt.Errorf("%w: empty record for job %q", ErrBadRecord, id)
	}
	body := r.Value[1:]
	switch r.Value[0] {
	case kindDone:
		return Result{Value: body, Fence: r.Fence}, nil
	case kindFailed:
		return Result{Fence: r.Fence}, &FailedError{ID: id, Fence: r.Fence, Msg: string(body)}
	}
	return Result{}, fmt.Errorf("%w: record for job %q starts with %q", ErrBadRecord, id, r.Value[0])
}
