// Package clock is the time source actors and the gateway are given instead
// of calling time.Now and time.AfterFunc themselves, so that a test can move
// time and fire timers on a signal instead of sleeping (house style 12, 22).
// Real is the wall clock; Manual is a clock a test drives.
package clock
