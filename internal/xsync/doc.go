// Package xsync holds the one way shardd starts a goroutine that outlives
// the call that started it: through a Group, which knows every goroutine it
// started, refuses new ones once shutdown has begun, recovers a panic into
// a logged error instead of taking the daemon down, and lets the owner wait
// for all of them (house style 10; the model is the gateway's goTracked).
package xsync
