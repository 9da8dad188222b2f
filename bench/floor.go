//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// The relay floor is the fan-out row no daemon can beat on this machine.
// The bench binary runs itself as a bare relay process: it starts the same
// runtime the baseline starts, copies each chunk it reads from the
// runtime's stdout to every measuring connection with one write per
// connection, and nothing else (no protocol, no parsing, no actor, no
// queue). Its clients are the daemon rows' probes, reading the same
// records the same way. The daemon crosses the same two kernel hand-offs
// (the runtime's pipe, then a socket per client) and does its work between
// them, so this row is what any relay process adds to the baseline here
// and the daemon row's distance to it is what shardd itself adds.
const (
	// floorEnv, in the bench binary's environment, makes it the bare
	// relay: the value is the unix socket to listen on.
	floorEnv = "BENCH_RELAY_FLOOR"
	// floorClientsEnv is the number of measuring connections it waits for
	// after the prompting one.
	floorClientsEnv = "BENCH_RELAY_FLOOR_CLIENTS"
	// floorShardd is the shardd binary whose runtime it runs.
	floorShardd = "BENCH_RELAY_FLOOR_SHARDD"
)

// runFloorRelay is the bare relay's main, when floorEnv is set: the first
// connection's bytes go to the runtime's stdin, and every chunk of the
// runtime's stdout goes to each of the next floorClientsEnv connections,
// in order. It returns the exit code when the runtime's stdout ends.
func runFloorRelay() int {
	sock := os.Getenv(floorEnv)
	clients, err := strconv.Atoi(os.Getenv(floorClientsEnv))
	if err != nil || clients < 1 {
		fmt.Fprintf(os.Stderr, "relay floor: $%s: want a count ≥ 1\n", floorClientsEnv)
		return 2
	}
	if err := floorRelay(sock, clients, os.Getenv(floorShardd)); err != nil {
		fmt.Fprintf(os.Stderr, "relay floor: %v\n", err)
		return 1
	}
	return 0
}

func floorRelay(sock string, clients int, shardd string) error {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BENCH_RELAY_FLOOR") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(shardd, "agent", "--headless")
	cmd.Dir = filepath.Dir(sock)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start runtime: %w", err)
	}
	fmt.Println("listening") // the driver waits for this line
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctl, err := ln.Accept()
	if err != nil {
		return err
	}
	go func() { _, _ = io.Copy(in, ctl) }()
	conns := make([]net.Conn, clients)
	for i := range conns {
		if conns[i], err = ln.Accept(); err != nil {
			return err
		}
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := out.Read(buf)
		for _, c := range conns {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fanoutFloor measures the bare relay (above) to clients probes: the same
// flood as the daemon rows, and like them without a warm-up flood.
func fanoutFloor(o *options, flood string, clients, n, size int) (fanoutPhase, error) {
	mark := cleanupMark()
	defer runCleanupsFrom(mark)
	self, err := os.Executable()
	if err != nil {
		return fanoutPhase{}, err
	}
	dir, err := tempDir()
	if err != nil {
		return fanoutPhase{}, err
	}
	home := filepath.Join(dir, "home")
	sock := filepath.Join(dir, "floor.sock")
	cmd := exec.Command(self)
	cmd.Env = cleanEnv(append([]string{"SHARD_HOME=" + home, floorEnv + "=" + sock,
		floorClientsEnv + "=" + strconv.Itoa(clients), floorShardd + "=" + o.shardd}, floodEnv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	ready, err := cmd.StdoutPipe()
	if err != nil {
		return fanoutPhase{}, err
	}
	if err := cmd.Start(); err != nil {
		return fanoutPhase{}, fmt.Errorf("start the bare relay: %w", err)
	}
	atCleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		killEnv("SHARD_HOME=" + home)
	})
	// The relay writes one line once it listens; EOF means it failed.
	if _, err := bufio.NewReader(ready).ReadString('\n'); err != nil {
		return fanoutPhase{}, fmt.Errorf("the bare relay did not start (%v): see its stderr", err)
	}
	ctl, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return fanoutPhase{}, err
	}
	atCleanup(func() { ctl.Close() })
	recvs := newFanoutRecvs(clients, n)
	probes := make([]*probe, clients)
	for i := range probes {
		nc, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			return fanoutPhase{}, fmt.Errorf("client %d: %w", i, err)
		}
		atCleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(fanoutTimeout))
		probes[i] = &probe{read: protocol.NewReader(nc, 0).Next}
	}
	results := make(chan int, clients)
	for i := range clients {
		go func() {
			defer func() { results <- i }()
			probes[i].loop(&recvs[i])
		}()
	}
	rec, err := json.Marshal(&protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: "floor"}, Message: flood})
	if err != nil {
		return fanoutPhase{}, err
	}
	snap := func() cpuSnap {
		s := cpuSnap{driver: selfCPU()}
		s.daemon, _ = procCPU(cmd.Process.Pid)
		return s
	}
	cpu0 := snap()
	start := time.Now()
	if _, err := ctl.Write(append(rec, '\n')); err != nil {
		return fanoutPhase{}, err
	}
	last, err := awaitFanout(recvs, results, n)
	if err != nil {
		return fanoutPhase{}, err
	}
	return fanoutStats(recvs, n, size, start, last, cpu0, snap()), nil
}
