// Command backchannel (tools/pair) stands in for the real binary when the conformance suite
// should run against two broker nodes behind a round-robin TCP proxy (SPEC 15: any node that
// shares the store serves any session). `serve --addr A …` starts two real serves
// (REAL_BACKCHANNEL) with the same flags on free ports, as node0 and node1, and hands each TCP
// connection to A to the next of them in turn; SIGTERM goes to both. Anything else runs the real
// binary. See docs/broker.md for the command.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sync/atomic"
	"syscall"
)

func main() {
	real := os.Getenv("REAL_BACKCHANNEL")
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "serve" {
		cmd := exec.Command(real, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			os.Exit(1)
		}
		return
	}
	addr := ""
	var rest []string
	for i := 1; i < len(args); i++ {
		if args[i] == "--addr" && i+1 < len(args) {
			addr = args[i+1]
			i++
			continue
		}
		rest = append(rest, args[i])
	}
	var backends []string
	var cmds []*exec.Cmd
	re := regexp.MustCompile(`listening on http://(\S+)`)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = "127.0.0.1"
	}
	for i := range 2 {
		cmd := exec.Command(real, append([]string{"serve", "--addr", net.JoinHostPort(host, "0"), "--node-id", fmt.Sprintf("node%d", i)}, rest...)...)
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				backends = append(backends, m[1])
				break
			}
		}
		if len(backends) <= i { // it exited without listening (bad configuration): so do we
			code := 1
			if err := cmd.Wait(); err != nil {
				if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
					code = ee.ExitCode()
				}
			}
			for _, c := range cmds {
				_ = c.Process.Kill()
			}
			os.Exit(code)
		}
		go io.Copy(io.Discard, out)
		cmds = append(cmds, cmd)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic(err)
	}
	fmt.Printf("backchannel listening on http://%s\n", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		for _, c := range cmds {
			_ = c.Process.Signal(s)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
		os.Exit(0)
	}()
	var n atomic.Int64
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b := backends[n.Add(1)%2]
		go func() {
			u, err := net.Dial("tcp", b)
			if err != nil {
				c.Close()
				return
			}
			go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
			io.Copy(c, u)
			c.Close()
		}()
	}
}
