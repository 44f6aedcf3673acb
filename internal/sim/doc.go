// Package sim is the machinery of the deterministic simulation of the lock
// protocols (the root's sim tests): a seeded random source, a simulated
// network between go-redis clients and in-process nodes (delay, reorder
// across connections, dropped replies, cut connections, blackholes,
// nodes that are down), node clocks that drift and step, a fault
// schedule drawn from one seed, a history of what the clients saw, the
// invariant checks on it, and a shrinker for failing schedules.
//
// It knows no Client or Lock and imports nothing outside the standard
// library: the tests plug the library's code in on one side and the nodes
// (miniredis, running the project's own scripts) on the other, inside a
// testing/synctest bubble whose fake clock makes every delay, timeout and
// expiry a function of the seed.
package sim
