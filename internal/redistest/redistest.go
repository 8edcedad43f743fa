// Package redistest starts private redis-server processes for tests: each on a loopback port
// of its own (port.go), in its own temporary directory, so a test can stop, kill and restart
// it without touching any other Redis on the machine.
//
// When BACKCHANNEL_TEST_REDIS_URL is set, New connects tests to that server instead (fault
// tests that must kill the server still start their own with Start). A missing redis-server
// program fails the test with the command that installs it; it never skips.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint is what a test prints when redis-server is missing.
const InstallHint = "redis-server is not installed: run `apt-get install -y redis-server` (or set BACKCHANNEL_TEST_REDIS_URL to a Redis you own)"

// Server is one private redis-server process.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Dir  string // its working directory (AOF files live here)

	t       testing.TB
	aof     bool
	busPort int // the cluster bus port in cluster mode, else 0
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
}

// Options configure Start.
type Options struct {
	// AOF turns on the append-only file (appendfsync always), so that a killed server loses
	// nothing it acknowledged.
	AOF bool
}

// URL is the redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Start starts a private redis-server for the test and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal(InstallHint)
	}
	s := &Server{Dir: t.TempDir(), t: t, aof: opts.AOF}
	if err := s.startOnFreePort(false); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { s.Kill() })
	return s
}

// errPortTaken: another process took the server's port before redis-server bound it.
var errPortTaken = errors.New("the port was taken")

// startOnFreePort starts the server on a free port (port.go) — and, in cluster mode, its bus on
// another — trying new ones when a port was taken before the server bound it.
func (s *Server) startOnFreePort(cluster bool) error {
	var err error
	for range 5 {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		if cluster {
			if s.busPort, err = freePort(); err != nil {
				return err
			}
		}
		s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		if err = s.start(); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

func (s *Server) start() error {
	args := []string{"--port", strings.Split(s.Addr, ":")[1], "--bind", "127.0.0.1",
		"--save", "", "--dir", s.Dir, "--logfile", filepath.Join(s.Dir, "redis.log")}
	if s.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if s.busPort != 0 {
		args = append(args, "--cluster-enabled", "yes", "--cluster-port", fmt.Sprint(s.busPort),
			"--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"), "--cluster-node-timeout", "2000")
	}
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.waitReady(10 * time.Second)
}

// waitReady waits until the server answers PING (and has loaded its AOF).
func (s *Server) waitReady(limit time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		exited := s.exited
		s.mu.Unlock()
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			if strings.Contains(string(log), "Address already in use") {
				return fmt.Errorf("redis-server on %s: %w:\n%s", s.Addr, errPortTaken, log)
			}
			return fmt.Errorf("redis-server on %s exited at start:\n%s", s.Addr, log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			// The server answering must be the one started (port.go): another process's on
			// the port means ours cannot bind it.
			if pid := infoField(info, "process_id"); pid != strconv.Itoa(s.pid()) {
				s.Kill()
				return fmt.Errorf("redis-server on %s: %w by another server (pid %s)", s.Addr, errPortTaken, pid)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer PING within %v", s.Addr, limit)
}

// pid is the server process's id.
func (s *Server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// infoField is the value of field in the text of an INFO reply ("" when it is absent).
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Kill stops the server at once with SIGKILL (no shutdown save) and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Restart starts the server again on the same port and directory (after Kill). With AOF on,
// it comes back with everything it had acknowledged.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// New returns a client for tests: to BACKCHANNEL_TEST_REDIS_URL when it is set, otherwise to
// a private server started for the test. The client is closed when the test ends.
func New(t testing.TB) *redis.Client {
	t.Helper()
	url := os.Getenv("BACKCHANNEL_TEST_REDIS_URL")
	if url == "" {
		url = Start(t, Options{}).URL()
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redistest: BACKCHANNEL_TEST_REDIS_URL %q: %v", url, err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix unique to this test, so tests sharing one server never see each
// other's keys.
func Prefix(t testing.TB) string {
	return fmt.Sprintf("bct:%d:%s:", time.Now().UnixNano(), strings.NewReplacer("/", "_", " ", "_", "{", "_", "}", "_").Replace(t.Name()))
}
