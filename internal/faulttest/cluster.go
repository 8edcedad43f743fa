package faulttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/redistest"
)

// ModuleRoot returns the directory of the module's go.mod (`go env GOMOD`).
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(mod), nil
}

// BuildBinary builds the broker (`go build ./cmd/backchannel`) into dir and returns its
// path; with race it is built with -race.
func BuildBinary(dir string, race bool) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "backchannel")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/backchannel")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// listening is the start-up line of `backchannel serve` (SPEC 18).
var listening = regexp.MustCompile(`backchannel listening on (http://\S+)`)

// node is one `backchannel serve` process.
type node struct {
	id     string
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string // its stdout and stderr
}

// startNode runs `backchannel serve` and waits for its start-up line.
func startNode(bin, id, logDir string, args ...string) (*node, error) {
	n := &node{id: id, exited: make(chan struct{}), log: filepath.Join(logDir, id+".log")}
	logf, err := os.Create(n.log)
	if err != nil {
		return nil, err
	}
	n.cmd = exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--node-id", id}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BACKCHANNEL_") {
			n.cmd.Env = append(n.cmd.Env, kv)
		}
	}
	n.cmd.Stderr = logf
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case up <- m[1]:
				default:
				}
			}
		}
		_ = n.cmd.Wait()
		logf.Close()
		close(n.exited)
	}()
	select {
	case u := <-up:
		n.url = u
		return n, nil
	case <-n.exited:
		b, _ := os.ReadFile(n.log)
		return nil, fmt.Errorf("node %s exited before listening:\n%s", id, b)
	case <-time.After(20 * time.Second):
		n.kill()
		return nil, fmt.Errorf("node %s printed no start-up line within 20s", id)
	}
}

// kill ends the process with SIGKILL (kill -9) and waits for it.
func (n *node) kill() {
	_ = n.cmd.Process.Kill()
	<-n.exited
}

// cluster is the brokers of one run: one node (memory or Redis store) or three nodes on one
// private Redis, with the faults of mode redis-cluster.
type cluster struct {
	bin    string
	mode   Mode
	logDir string
	redis  *redistest.Server

	mu    sync.Mutex
	live  []*node
	all   []*node
	next  int
	rng   *rand.Rand
	kills int
}

func startCluster(t testing.TB, bin string, mode Mode, seed uint64) (*cluster, error) {
	logDir := t.TempDir()
	if dir := os.Getenv("FAULT_LOGS"); dir != "" { // keep the nodes' logs
		logDir = filepath.Join(dir, fmt.Sprintf("%s_seed%d", mode, seed))
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return nil, err
		}
	}
	c := &cluster{bin: bin, mode: mode, logDir: logDir, rng: rand.New(rand.NewPCG(seed, 0xc1))}
	t.Cleanup(c.stop)
	n := 1
	if mode != ModeMemory {
		c.redis = redistest.Start(t, redistest.Options{AOF: true})
	}
	if mode == ModeCluster {
		n = 3
	}
	for range n {
		if _, err := c.startNode(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// startNode starts one more node and makes it live.
func (c *cluster) startNode() (*node, error) {
	c.mu.Lock()
	c.next++
	id := fmt.Sprintf("n%d", c.next)
	c.mu.Unlock()
	args := []string{"--background-after", "300ms", "--resume-window", "10m"}
	if c.redis != nil {
		args = append(args, "--store", "redis", "--redis-url", c.redis.URL())
	}
	n, err := startNode(c.bin, id, c.logDir, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.live = append(c.live, n)
	c.all = append(c.all, n)
	c.mu.Unlock()
	return n, nil
}

// pick returns the base URL of a random live node ("" when none is).
func (c *cluster) pick() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.live) == 0 {
		return ""
	}
	return c.live[c.rng.IntN(len(c.live))].url
}

// killRandom kills a random live node with SIGKILL and returns it.
func (c *cluster) killRandom(r *rand.Rand) *node {
	c.mu.Lock()
	if len(c.live) == 0 {
		c.mu.Unlock()
		return nil
	}
	i := r.IntN(len(c.live))
	n := c.live[i]
	c.live = append(c.live[:i:i], c.live[i+1:]...)
	c.kills++
	c.mu.Unlock()
	n.kill()
	return n
}

// stop kills every node still running.
func (c *cluster) stop() {
	c.mu.Lock()
	all := append([]*node(nil), c.all...)
	c.live = nil
	c.mu.Unlock()
	for _, n := range all {
		select {
		case <-n.exited:
		default:
			n.kill()
		}
	}
}

// logTail returns the last lines of every node's log (for a failing run's report).
func (c *cluster) logTail(lines int) string {
	c.mu.Lock()
	all := append([]*node(nil), c.all...)
	c.mu.Unlock()
	var b strings.Builder
	for _, n := range all {
		data, _ := os.ReadFile(n.log)
		ls := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(ls) > lines {
			ls = ls[len(ls)-lines:]
		}
		fmt.Fprintf(&b, "--- node %s (%s), last %d lines of %s\n%s\n", n.id, n.url, len(ls), n.log, strings.Join(ls, "\n"))
	}
	return b.String()
}

// createSession makes a session with POST /v1/sessions on a live node (the dev key).
func (c *cluster) createSession(ctx context.Context) (id, joinToken string, err error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		base := c.pick()
		id, joinToken, err = postSession(ctx, base)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return id, joinToken, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
