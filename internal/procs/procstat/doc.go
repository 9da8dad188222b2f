// Package procstat parses /proc/<pid>/stat, the one line in which Linux
// says a process's state, parent, group, CPU time, niceness, start time
// and scheduling policy. The line is easy to misread: the command name
// (field 2) is whatever the process chose, spaces and parentheses
// included, so the fields are counted from the last ')' of the line, and
// one parser does it for every caller.
//
// It imports only the standard library, so that the reference runtime and
// shardctl, which must not link daemon code, can use it as the daemon
// does.
package procstat
