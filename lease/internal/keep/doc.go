// Package keep keeps a lease renewed: the refresher that lease.Hold and
// lease.Run use for a Lock whose backend does not renew it itself, the
// hook by which a backend that does hands them its Keeper, and the timing
// rules both follow (the renewal interval, the loss lead). Package lease
// uses it for its users, package lease/backend exports it to backends.
package keep
