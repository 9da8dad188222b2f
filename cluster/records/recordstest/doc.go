// Package recordstest lets a test outside cluster/ reach a cluster's
// records as a node would: it dials a node's NATS client port with the
// cluster token and opens cluster/records over it, so a binary-level test
// can play a node (write jobs and runs, follow them) without importing
// NATS itself (the rule that only cluster/... imports NATS).
package recordstest
