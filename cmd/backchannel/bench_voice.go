package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchVoice runs `backchannel bench voice` (issue 20): for each number of callers, a fresh
// `backchannel serve` (memory store; the scripted model, or with -model openai the OpenAI
// adapter against a `backchannel simulate-realtime` child), and that many WebRTC callers in this
// process, each with a WebSocket host serving a deferred tool its voice model calls. It reports
// the broker's CPU and memory per caller, its added audio latency both ways and its barge-in
// reaction (its own histograms, read from /metrics), and packet loss counted at both ends.
func benchVoice(args []string) error {
	fs := flag.NewFlagSet("bench voice", flag.ContinueOnError)
	o := voiceOptions{}
	callers := fs.String("callers", "50,100,200,300,500", "numbers of concurrent callers, one step each (a fresh serve per step)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured time of each step")
	fs.StringVar(&o.model, "model", "scripted", "voice model: scripted, or openai (the adapter against simulate-realtime)")
	fs.DurationVar(&o.callEvery, "call-every", 10*time.Second, "each caller asks for the deferred tool this often (caller.text `call render_report {…}`)")
	fs.IntVar(&o.parallel, "connect-parallel", 16, "callers connecting at once while a step is set up")
	fs.StringVar(&o.profileDir, "cpuprofile-dir", "", "write CPU profiles of serve (serve-N.pprof) and of the bench (bench-N.pprof) for each step here")
	fs.StringVar(&o.jsonOut, "json", "", "also write the results of every step to this file as JSON")
	fs.StringVar(&o.bin, "bin", "", "the backchannel binary to run serve (and simulate-realtime) with (default: this one)")
	serveArgs := fs.String("serve-args", "", "more flags for serve, separated by spaces (e.g. --webrtc-udp-port 50000)")
	fs.BoolVar(&o.espeak, "espeak", false, "let the scripted model speak with espeak-ng when it is installed (default: serve runs with an empty PATH, so it speaks its tone: the bench measures the broker, not speech synthesis)")
	callerIP := fs.String("caller-ip", "127.0.0.1", "the IPv4 address the callers' one UDP socket is bound to (another than loopback for a serve with --webrtc-udp-port, which offers no loopback candidate)")
	fs.BoolVar(&o.callerMux, "caller-mux", true, "all callers on one UDP socket (an ICE UDP mux); false: a socket each (needed against a serve with --webrtc-udp-port, whose mux tells peers apart by address)")
	fs.BoolVar(&o.pin, "pin", false, "give serve the cores but the last one and the bench (and simulate-realtime) the last one (taskset), so the load generator does not take the broker's CPU time; needs 2 cores or more")
	fs.Float64Var(&o.targetMS, "target-p99-ms", 20, "p99 added latency (both ways) a step must stay within to pass")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.serveArgs = strings.Fields(*serveArgs)
	if o.callerIP = net.ParseIP(*callerIP).To4(); o.callerIP == nil {
		return fmt.Errorf("-caller-ip %q: want an IPv4 address", *callerIP)
	}
	if o.model != "scripted" && o.model != "openai" {
		return fmt.Errorf("-model %q: want scripted or openai", o.model)
	}
	var steps []int
	for _, s := range strings.Split(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-callers %q: want positive numbers separated by commas", *callers)
		}
		steps = append(steps, n)
	}
	if o.bin == "" {
		bin, err := os.Executable()
		if err != nil {
			return err
		}
		o.bin = bin
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
	}
	if o.pin {
		if err := o.pinCPUs(); err != nil {
			return err
		}
	}
	var results []*voiceResult
	for i, n := range steps {
		r, err := runVoiceStep(o, i+1, n)
		if err != nil {
			return fmt.Errorf("%d callers: %w", n, err)
		}
		r.print(o.targetMS)
		results = append(results, r)
	}
	printVoiceTable(results, o)
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// voiceOptions are the flags of bench voice.
type voiceOptions struct {
	duration   time.Duration
	model      string
	callEvery  time.Duration
	parallel   int
	profileDir string
	jsonOut    string
	bin        string
	targetMS   float64
	serveArgs  []string
	espeak     bool
	callerIP   net.IP
	callerMux  bool
	pin        bool
	taskset    string
	serveCPUs  string // with pin: the cores of serve, and of this process
	benchCPUs  string
}

// pinCPUs splits the cores: serve gets all but the last (its GOMAXPROCS follows), this process
// — and the simulator it starts — the last one. With taskset -a every thread of this process
// moves; threads made later inherit it.
func (o *voiceOptions) pinCPUs() error {
	path, err := exec.LookPath("taskset")
	if err != nil {
		return errors.New("-pin needs taskset (apt-get install util-linux)")
	}
	n := runtime.NumCPU()
	if n < 2 {
		return fmt.Errorf("-pin needs 2 cores or more; this machine has %d", n)
	}
	o.taskset, o.benchCPUs = path, strconv.Itoa(n-1)
	o.serveCPUs = "0"
	if n > 2 {
		o.serveCPUs = fmt.Sprintf("0-%d", n-2)
	}
	if out, err := exec.Command(path, "-a", "-p", "-c", o.benchCPUs, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		return fmt.Errorf("taskset: %v: %s", err, out)
	}
	return nil
}

// voiceResult is what one step measured. Latencies are in milliseconds.
type voiceResult struct {
	Model     string  `json:"model"`
	Callers   int     `json:"callers"`
	Connected int     `json:"connected"`
	Seconds   float64 `json:"seconds"`

	BrokerCPUPct       float64 `json:"broker_cpu_pct"` // of one core
	BrokerCPUPerCaller float64 `json:"broker_cpu_pct_per_caller"`
	BenchCPUPct        float64 `json:"bench_cpu_pct"`
	SimCPUPct          float64 `json:"simulator_cpu_pct,omitempty"`
	MachineCPUPct      float64 `json:"machine_cpu_pct"` // all cores busy (/proc/stat), 100 per core
	OtherCPUPct        float64 `json:"other_cpu_pct"`   // of it, neither the broker, the bench nor the simulator
	RSSMiB             float64 `json:"broker_rss_mib"`
	RSSPerCallerKiB    float64 `json:"broker_rss_kib_per_caller"`

	InP50, InP99, OutP50, OutP99 float64
	InP999, OutP90, OutP999      float64
	OutOver20                    float64 `json:"out_over_20ms_pct"` // share of agent frames written more than 20 ms after due
	InObserved                   int64   `json:"in_observed"`       // observations of the in-delay histogram
	OutObserved                  int64   `json:"out_observed"`      // and of the out-delay histogram
	InPackets                    int64   `json:"in_packets_broker"`
	InSent                       int64   `json:"in_packets_sent"`
	InLost                       int64   `json:"in_packets_lost"`
	OutPackets                   int64   `json:"out_packets_broker"`
	OutReceived                  int64   `json:"out_packets_received"`
	OutSeqGaps                   int64   `json:"out_seq_gaps"`
	OutDropped                   int64   `json:"out_dropped_broker"`
	BargeIns                     int64   `json:"barge_ins"`
	BargeP50, BargeP99           float64
	NarrationP99                 float64 `json:"narration_start_p99"`
	SendLateP99                  float64 `json:"bench_send_late_p99"` // the bench's own pacing of the microphones

	ToolCalls     int64          `json:"tool_calls"`
	Defers        int64          `json:"defers_accepted"`
	Turns         int            `json:"turns_sent"`
	PlannedBarges int            `json:"barge_ins_planned"`
	Transcripts   int64          `json:"agent_transcripts"`
	ErrorFrames   int64          `json:"error_frames"`
	Narrations    map[string]int `json:"narrations"`
	Pass          bool           `json:"pass"`
	Pinned        bool           `json:"pinned"`
}

// runVoiceStep runs one step: serve (and the simulator), n callers with their hosts, the
// measured window, and the teardown.
func runVoiceStep(o voiceOptions, step, n int) (*voiceResult, error) {
	args := []string{"serve", "--addr", "127.0.0.1:0", "--api-keys", "bench=" + benchKey, "--store", "memory",
		"--max-sessions-per-tenant", strconv.Itoa(n + 100)}
	var sim *served
	if o.model == "openai" {
		var err error
		if sim, err = startSimulator(o.bin); err != nil {
			return nil, err
		}
		defer sim.stop()
		args = append(args, "--model", "openai", "--openai-url", "ws://"+sim.addr+"/v1/realtime")
	}
	args = append(args, o.serveArgs...)
	if o.profileDir != "" {
		args = append(args, "--cpuprofile", filepath.Join(o.profileDir, fmt.Sprintf("serve-%d.pprof", n)))
	}
	var env []string // nil: this process's environment
	if !o.espeak {
		// serve runs no other program than espeak-ng: with an empty PATH the scripted model
		// speaks its tone, as on a machine without espeak-ng.
		empty, err := os.MkdirTemp("", "bench-voice-path-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(empty)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PATH=") {
				env = append(env, kv)
			}
		}
		env = append(env, "PATH="+empty)
	}
	bin := o.bin
	if o.pin {
		bin, args = o.taskset, append([]string{"-c", o.serveCPUs, o.bin}, args...)
	}
	srv, err := startServeEnv(bin, args, env)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	fmt.Printf("== %d callers, model %s: broker pid %d at %s\n", n, o.model, srv.cmd.Process.Pid, srv.addr)
	if o.pin {
		fmt.Printf("   serve on cores %s; the bench and the simulator on core %s\n", o.serveCPUs, o.benchCPUs)
	}
	time.Sleep(500 * time.Millisecond)
	rss0 := srv.rss()

	api, err := newCallerAPI(o.callerIP, o.callerMux)
	if err != nil {
		return nil, err
	}
	defer api.close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+o.duration)
	defer cancel()
	callers, err := connectCallers(ctx, api, srv.addr, step, n, o.parallel)
	defer func() {
		var wg sync.WaitGroup
		for _, c := range callers {
			if c != nil {
				wg.Add(1)
				go func() { defer wg.Done(); c.close() }()
			}
		}
		wg.Wait()
	}()
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second) // the connections settle (DTLS, SCTP, the first RTCP)

	if o.profileDir != "" {
		f, err := os.Create(filepath.Join(o.profileDir, fmt.Sprintf("bench-%d.pprof", n)))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	m0, err := scrapeMetrics(ctx, srv.addr)
	if err != nil {
		return nil, err
	}
	cpu0, bench0, mach0, t0 := srv.cpuSeconds(), processCPU(), machineBusySeconds(), time.Now()
	var sim0 float64
	if sim != nil {
		sim0 = cpuSecondsOf(sim.cmd.Process.Pid)
	}
	received0 := make([]int64, len(callers))
	for i, c := range callers {
		received0[i] = c.received.Load()
	}
	plan := talkPlan{start: t0.Add(100 * time.Millisecond), callEvery: o.callEvery}
	plan.end = plan.start.Add(o.duration)
	var wg sync.WaitGroup
	for i, c := range callers {
		wg.Add(1)
		rng := rand.New(rand.NewPCG(uint64(step), uint64(i)))
		p := plan
		p.start = p.start.Add(time.Duration(rng.Int64N(int64(20 * time.Millisecond)))) // the microphones' phases
		p.firstCall = 500*time.Millisecond + time.Duration(rng.Int64N(int64(min(o.callEvery, 3*time.Second))))
		go func() { defer wg.Done(); c.talk(p, rng) }()
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // the last packets reach the model
	rss1 := srv.rss()
	cpu1, bench1, mach1, elapsed := srv.cpuSeconds(), processCPU(), machineBusySeconds(), time.Since(t0)
	m1, err := scrapeMetrics(ctx, srv.addr)
	if err != nil {
		return nil, err
	}
	r := &voiceResult{Model: o.model, Callers: n, Connected: len(callers), Seconds: round2(elapsed.Seconds()), Narrations: map[string]int{}, Pinned: o.pin}
	if sim != nil {
		r.SimCPUPct = round2(100 * (cpuSecondsOf(sim.cmd.Process.Pid) - sim0) / elapsed.Seconds())
	}
	r.BrokerCPUPct = round2(100 * (cpu1 - cpu0) / elapsed.Seconds())
	r.BrokerCPUPerCaller = round3(r.BrokerCPUPct / float64(n))
	r.BenchCPUPct = round2(100 * (bench1 - bench0) / elapsed.Seconds())
	r.MachineCPUPct = round2(100 * (mach1 - mach0) / elapsed.Seconds())
	r.OtherCPUPct = round2(max(0, r.MachineCPUPct-r.BrokerCPUPct-r.BenchCPUPct-r.SimCPUPct))
	r.RSSMiB = round2(float64(rss1) / (1 << 20))
	r.RSSPerCallerKiB = round2(float64(rss1-rss0) / 1024 / float64(n))
	d := diffScrapes(m0, m1)
	toMS := func(s float64) float64 { // no observations: 0 (the counts say so); beyond the last bound: 1 s
		if math.IsNaN(s) {
			return 0
		}
		return round3(min(s, 1) * 1000)
	}
	r.InObserved, r.OutObserved = int64(d.in.total()), int64(d.out.total())
	r.InP999, r.OutP90, r.OutP999 = toMS(d.in.quantile(0.999)), toMS(d.out.quantile(0.9)), toMS(d.out.quantile(0.999))
	if n := d.out.total(); n > 0 {
		r.OutOver20 = round3(100 * (n - d.out.countAtMost(0.02)) / n)
	}
	r.InP50, r.InP99 = toMS(d.in.quantile(0.5)), toMS(d.in.quantile(0.99))
	r.OutP50, r.OutP99 = toMS(d.out.quantile(0.5)), toMS(d.out.quantile(0.99))
	r.BargeIns = int64(d.bargeIn.total())
	r.BargeP50, r.BargeP99 = toMS(d.bargeIn.quantile(0.5)), toMS(d.bargeIn.quantile(0.99))
	r.NarrationP99 = toMS(d.narration.quantile(0.99))
	r.InPackets, r.OutPackets, r.OutDropped = int64(d.inPackets), int64(d.outPackets), int64(d.outDropped)
	var late []int64
	for i, c := range callers {
		r.InSent += c.sent
		r.OutReceived += c.received.Load() - received0[i]
		r.OutSeqGaps += c.lost.Load()
		r.Turns += c.turns
		r.PlannedBarges += c.bargeIns
		r.Transcripts += c.transcript.Load()
		r.ErrorFrames += c.errFrames.Load()
		r.ToolCalls += c.host.calls.Load()
		r.Defers += c.host.acks.Load()
		for k, v := range c.host.narrated() {
			r.Narrations[k] += v
		}
		if late == nil {
			late = make([]int64, len(c.late))
		}
		for j, v := range c.late {
			late[j] += v
		}
	}
	r.InLost = r.InSent - r.InPackets
	r.SendLateP99 = lateQuantile(late, 0.99)
	r.Pass = r.Connected == n && r.InP99 <= o.targetMS && r.OutP99 <= o.targetMS && r.InLost == 0 && r.OutSeqGaps == 0 && r.OutDropped == 0
	return r, nil
}

// connectCallers creates n sessions, each with its host and a connected caller, parallel at a
// time.
func connectCallers(ctx context.Context, api *callerAPI, addr string, step, n, parallel int) ([]*benchCaller, error) {
	callers := make([]*benchCaller, n)
	var failed firstError
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(parallel, 1))
	start := time.Now()
	for i := range callers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if failed.get() != nil {
				return
			}
			c, err := newBenchCaller(ctx, addr, i)
			if err != nil {
				failed.set(fmt.Errorf("caller %d: %w", i, err))
				return
			}
			callers[i] = c
			if c.host, err = startBenchHost(ctx, addr, c, step); err != nil {
				failed.set(fmt.Errorf("host %d: %w", i, err))
				return
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := c.connect(cctx, api, addr); err != nil {
				failed.set(fmt.Errorf("caller %d: %w", i, err))
			}
		}()
	}
	wg.Wait()
	if err := failed.get(); err != nil {
		return callers, err
	}
	fmt.Printf("   %d callers connected in %.1fs (WebRTC, PCMU, data channel hello welcomed)\n", n, time.Since(start).Seconds())
	return callers, nil
}

// machineBusySeconds is the CPU time all cores spent busy so far (/proc/stat: everything but
// idle and iowait), in seconds.
func machineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest time is counted in user already
			busy += n
		}
	}
	return busy / 100
}

// lateQuantile is the q-quantile of a lateness histogram of 1 ms buckets, in ms (the bucket's
// upper end).
func lateQuantile(h []int64, q float64) float64 {
	var total int64
	for _, v := range h {
		total += v
	}
	if total == 0 {
		return 0
	}
	rank := int64(q * float64(total))
	var sum int64
	for i, v := range h {
		sum += v
		if sum > rank {
			return float64(i + 1)
		}
	}
	return float64(len(h))
}

// print writes the step's figures.
func (r *voiceResult) print(target float64) {
	fmt.Printf("   window %.1fs: broker CPU %.1f%% of a core (%.3f%% per caller), RSS %.0f MiB (%.0f KiB per caller); bench CPU %.0f%%",
		r.Seconds, r.BrokerCPUPct, r.BrokerCPUPerCaller, r.RSSMiB, r.RSSPerCallerKiB, r.BenchCPUPct)
	if r.Model == "openai" {
		fmt.Printf("; simulator CPU %.0f%%", r.SimCPUPct)
	}
	fmt.Printf("; machine %.0f%% busy, %.0f%% of it other processes\n", r.MachineCPUPct, r.OtherCPUPct)
	fmt.Printf("   audio in  (RTP read → model input):   p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms   packets sent %d, counted by the broker %d: lost %d\n",
		r.InP50, r.InP99, r.InP999, r.InSent, r.InPackets, r.InLost)
	fmt.Printf("   audio out (due by pacing → RTP write): p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  (%.2f%% over 20 ms)   packets written %d, received %d: sequence gaps %d, dropped in the broker %d\n",
		r.OutP50, r.OutP90, r.OutP99, r.OutP999, r.OutOver20, r.OutPackets, r.OutReceived, r.OutSeqGaps, r.OutDropped)
	fmt.Printf("   barge-in (speech start → agent audio stopped): p50 %.2f ms  p99 %.2f ms  (%d barge-ins; %d planned talk-overs)\n",
		r.BargeP50, r.BargeP99, r.BargeIns, r.PlannedBarges)
	keys := make([]string, 0, len(r.Narrations))
	for k := range r.Narrations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Narrations[k]))
	}
	fmt.Printf("   tool calls %d (turns %d, defers accepted %d), narrations: %s; agent transcripts %d, error frames %d\n",
		r.ToolCalls, r.Turns, r.Defers, strings.Join(parts, ", "), r.Transcripts, r.ErrorFrames)
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Printf("   bench microphone lateness p99 %.0f ms; target p99 ≤ %.0f ms both ways, no loss: %s\n", r.SendLateP99, target, verdict)
}

// printVoiceTable writes the table of docs/BENCHMARKS.md and the largest passing step.
func printVoiceTable(rs []*voiceResult, o voiceOptions) {
	pinned := ""
	if o.pin {
		pinned = fmt.Sprintf(", serve on cores %s and the bench on core %s", o.serveCPUs, o.benchCPUs)
	}
	fmt.Printf("\nmodel %s, %s per step%s:\n\n", o.model, o.duration, pinned)
	fmt.Println("| callers | broker CPU | per caller | RSS per caller | in p50 / p99 | out p50 / p99 | loss in / out | barge-in p50 / p99 (n) | pass |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	best := 0
	for _, r := range rs {
		pass := "no"
		if r.Pass {
			pass = "yes"
			best = max(best, r.Callers)
		}
		fmt.Printf("| %d | %.0f%% | %.3f%% | %.0f KiB | %.2f / %.2f ms | %.2f / %.2f ms | %d / %d | %.2f / %.2f ms (%d) | %s |\n",
			r.Callers, r.BrokerCPUPct, r.BrokerCPUPerCaller, r.RSSPerCallerKiB, r.InP50, r.InP99, r.OutP50, r.OutP99,
			r.InLost, r.OutSeqGaps+r.OutDropped, r.BargeP50, r.BargeP99, r.BargeIns, pass)
	}
	fmt.Printf("\nlargest number of callers with p99 ≤ %.0f ms both ways and no loss: %d\n", o.targetMS, best)
}

// startSimulator runs `backchannel simulate-realtime` on a free loopback port; the child's
// address is HOST:PORT (its Realtime endpoint is ws://HOST:PORT/v1/realtime).
func startSimulator(bin string) (*served, error) {
	return startChild(bin, []string{"simulate-realtime", "--addr", "127.0.0.1:0"}, nil, simListenRE, "simulate-realtime")
}

var simListenRE = regexp.MustCompile(`realtime simulator listening on ws://([^/\s]+)`)
