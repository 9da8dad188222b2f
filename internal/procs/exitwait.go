package procs

import (
	"os"

	"golang.org/x/sys/unix"
)

// WaitExit blocks until the process pid has exited (it may still be a
// zombie: the caller reaps it, e.g. with exec.Cmd.Wait, which then returns
// at once). It waits in the Go netpoller on a pidfd, so a goroutine parked
// here holds no OS thread — unlike Process.Wait, whose waitid blocks a
// thread for as long as the child lives: one thread (and its stacks) per
// live runtime, a budgeted cost per idle agent. It returns false when the
// kernel offers no pidfd (before Linux 5.3) or polling fails; the caller
// then falls back to a blocking wait.
func WaitExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd") // non-blocking: registered with the netpoller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		// A pidfd is readable once its process has exited; poll it
		// without blocking, and let the netpoller wait otherwise.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, perr := unix.Poll(pfd, 0)
		if perr == unix.EINTR {
			return false
		}
		exited = perr == nil && n > 0
		return exited || perr != nil
	})
	return err == nil && exited
}
