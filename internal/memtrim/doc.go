// Package memtrim returns to the kernel the pages of the process's own
// executable that it no longer needs.
//
// The reference runtime is the shardd binary itself (`shardd agent`), so
// every runtime child runs the initialization of every package the daemon
// links and touches megabytes of code and read-only data it will not use
// again while it sits idle. Those pages are clean copies of the executable
// file: dropping them from the process's page tables is safe at any moment
// (the next access faults them back in from the page cache) and is what
// keeps an idle child's resident set to what being idle actually uses.
// Writable mappings (.data, .bss, the heap) are never touched.
package memtrim
