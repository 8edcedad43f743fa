package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	pionwebrtc "github.com/pion/webrtc/v4"
	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/mcp"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	bcwebrtc "github.com/backchannel-io/backchannel/broker/webrtc"
	"github.com/backchannel-io/backchannel/broker/ws"
	"github.com/backchannel-io/backchannel/cluster"
	"github.com/backchannel-io/backchannel/jobs/memstore"
	"github.com/backchannel-io/backchannel/jobs/redisstore"
	"github.com/backchannel-io/backchannel/permissions"
)

// serveConfig is the configuration of `backchannel serve` (SPEC 18).
type serveConfig struct {
	addr            string
	store           string
	redisURL        string
	apiKeys         string
	model           string
	openAIURL       string
	openAIKey       string
	openAIModel     string
	resumeWindow    time.Duration
	backgroundAfter time.Duration
	mcpIdle         time.Duration
	nodeID          string
	judgeURL        string
	judgeKey        string
	judgeModel      string
	rtcUDPPort      int
	rtcUDPPortMin   int
	rtcUDPPortMax   int
	rtcPublicIP     string
	rtcICEServers   string
	rtcTURNUser     string
	rtcTURNPass     string
	allowedOrigins  string
	publicURL       string
	maxSessions     int
	maxHostSlots    int
	timelineMax     int
	maxFollowers    int
	pprofAddr       string
	cpuProfile      string
	gcPercent       int
}

// envOr returns the environment variable's value, or def.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// envParsed returns the environment variable's value as parse reads it, or def when it is not
// set; a value parse refuses is an error naming the variable.
func envParsed[T any](name string, def T, parse func(string) (T, error)) (T, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def, nil
	}
	x, err := parse(v)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s=%q: %v", name, v, err)
	}
	return x, nil
}

// envDuration returns the environment variable's value as a duration, or def.
func envDuration(name string, def time.Duration) (time.Duration, error) {
	return envParsed(name, def, time.ParseDuration)
}

func parseServe(args []string) (*serveConfig, error) {
	c := &serveConfig{}
	host, _ := os.Hostname()
	rw, err := envDuration("BACKCHANNEL_RESUME_WINDOW", 2*time.Minute)
	if err != nil {
		return nil, err
	}
	mi, err := envDuration("BACKCHANNEL_MCP_IDLE", broker.DefaultMCPIdle)
	if err != nil {
		return nil, err
	}
	ba, err := envDuration("BACKCHANNEL_BACKGROUND_AFTER", 2*time.Second)
	if err != nil {
		return nil, err
	}
	rtcPort, err := envInt("BACKCHANNEL_WEBRTC_UDP_PORT", 0)
	if err != nil {
		return nil, err
	}
	rtcPortMin, err := envInt("BACKCHANNEL_WEBRTC_UDP_PORT_MIN", 0)
	if err != nil {
		return nil, err
	}
	rtcPortMax, err := envInt("BACKCHANNEL_WEBRTC_UDP_PORT_MAX", 0)
	if err != nil {
		return nil, err
	}
	maxSessions, err := envInt("BACKCHANNEL_MAX_SESSIONS_PER_TENANT", 10000)
	if err != nil {
		return nil, err
	}
	maxHostSlots, err := envInt("BACKCHANNEL_MAX_HOST_SLOTS", 16)
	if err != nil {
		return nil, err
	}
	maxFollowers, err := envInt("BACKCHANNEL_MAX_TIMELINE_FOLLOWERS", 8)
	if err != nil {
		return nil, err
	}
	gcPercent, err := envInt("BACKCHANNEL_GC_PERCENT", gcPercentDefault())
	if err != nil {
		return nil, err
	}
	timelineMax, err := envParsed("BACKCHANNEL_TIMELINE_MAX_BYTES", 4<<20, parseSize)
	if err != nil {
		return nil, err
	}
	c.timelineMax = timelineMax
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", envOr("BACKCHANNEL_ADDR", "127.0.0.1:8080"), "HTTP/WebSocket listen address [BACKCHANNEL_ADDR]")
	fs.StringVar(&c.store, "store", envOr("BACKCHANNEL_STORE", "memory"), "job store: memory or redis [BACKCHANNEL_STORE]")
	fs.StringVar(&c.redisURL, "redis-url", envOr("BACKCHANNEL_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis URL, with --store redis; a cluster: redis://HOST:PORT?addr=HOST2:PORT2&addr=… [BACKCHANNEL_REDIS_URL]")
	fs.StringVar(&c.apiKeys, "api-keys", envOr("BACKCHANNEL_API_KEYS", ""), "tenant=key,tenant2=key2; empty on loopback: tenant dev with key dev [BACKCHANNEL_API_KEYS]")
	fs.StringVar(&c.model, "model", envOr("BACKCHANNEL_MODEL", "scripted"), "default voice model: scripted or openai [BACKCHANNEL_MODEL]")
	fs.StringVar(&c.openAIURL, "openai-url", envOr("BACKCHANNEL_OPENAI_URL", "wss://api.openai.com/v1/realtime"), "Realtime endpoint for --model openai [BACKCHANNEL_OPENAI_URL]")
	fs.StringVar(&c.openAIKey, "openai-key", envOr("BACKCHANNEL_OPENAI_KEY", ""), "API key for --model openai [BACKCHANNEL_OPENAI_KEY]")
	fs.StringVar(&c.openAIModel, "openai-model", envOr("BACKCHANNEL_OPENAI_MODEL", "gpt-realtime"), "model for --model openai [BACKCHANNEL_OPENAI_MODEL]")
	fs.DurationVar(&c.resumeWindow, "resume-window", rw, "how long a dropped connection's slot waits for a resume [BACKCHANNEL_RESUME_WINDOW]")
	fs.DurationVar(&c.backgroundAfter, "background-after", ba, "when a text agent's unfinished call goes to the background [BACKCHANNEL_BACKGROUND_AFTER]")
	fs.DurationVar(&c.mcpIdle, "mcp-idle", mi, "how long an MCP session with no request and no open stream lives (mcp_idle_ms) [BACKCHANNEL_MCP_IDLE]")
	fs.StringVar(&c.judgeURL, "judge-url", envOr("BACKCHANNEL_JUDGE_URL", ""), "OpenAI-compatible chat completions base URL of an LLM judge for spoken permissions; its approvals must still pass the rule-based vetoes (default: the rule-based verifier alone) [BACKCHANNEL_JUDGE_URL]")
	fs.StringVar(&c.judgeKey, "judge-key", envOr("BACKCHANNEL_JUDGE_KEY", ""), "API key of the LLM judge [BACKCHANNEL_JUDGE_KEY]")
	fs.StringVar(&c.judgeModel, "judge-model", envOr("BACKCHANNEL_JUDGE_MODEL", "gpt-4.1-mini"), "model of the LLM judge [BACKCHANNEL_JUDGE_MODEL]")
	fs.IntVar(&c.rtcUDPPort, "webrtc-udp-port", rtcPort, "one UDP port for every WebRTC caller (0: an ephemeral port each); not with --webrtc-udp-port-min/max [BACKCHANNEL_WEBRTC_UDP_PORT]")
	fs.IntVar(&c.rtcUDPPortMin, "webrtc-udp-port-min", rtcPortMin, "lowest UDP port for WebRTC callers, one port each, with --webrtc-udp-port-max (0: any ephemeral port) [BACKCHANNEL_WEBRTC_UDP_PORT_MIN]")
	fs.IntVar(&c.rtcUDPPortMax, "webrtc-udp-port-max", rtcPortMax, "highest UDP port for WebRTC callers, with --webrtc-udp-port-min (0: any ephemeral port) [BACKCHANNEL_WEBRTC_UDP_PORT_MAX]")
	fs.StringVar(&c.rtcPublicIP, "webrtc-public-ip", envOr("BACKCHANNEL_WEBRTC_PUBLIC_IP", ""), "public IP announced to WebRTC callers behind NAT [BACKCHANNEL_WEBRTC_PUBLIC_IP]")
	fs.StringVar(&c.rtcICEServers, "webrtc-ice-servers", envOr("BACKCHANNEL_WEBRTC_ICE_SERVERS", ""), "comma-separated STUN/TURN URLs for WebRTC (stun:HOST:PORT, turn:HOST:PORT?transport=udp) [BACKCHANNEL_WEBRTC_ICE_SERVERS]")
	fs.StringVar(&c.rtcTURNUser, "webrtc-turn-username", envOr("BACKCHANNEL_WEBRTC_TURN_USERNAME", ""), "username for the turn:/turns: URLs of --webrtc-ice-servers [BACKCHANNEL_WEBRTC_TURN_USERNAME]")
	fs.StringVar(&c.rtcTURNPass, "webrtc-turn-credential", envOr("BACKCHANNEL_WEBRTC_TURN_CREDENTIAL", ""), "password for the turn:/turns: URLs of --webrtc-ice-servers [BACKCHANNEL_WEBRTC_TURN_CREDENTIAL]")
	fs.StringVar(&c.allowedOrigins, "allowed-origins", envOr("BACKCHANNEL_ALLOWED_ORIGINS", ""), "comma-separated browser origins (https://app.example.com) allowed to open WebSockets, MCP and HTTP API requests, * for any; others get 403 (the broker's own origin is always allowed) [BACKCHANNEL_ALLOWED_ORIGINS]")
	fs.StringVar(&c.publicURL, "public-url", envOr("BACKCHANNEL_PUBLIC_URL", ""), "the base URL clients reach the broker at behind a proxy (https://voice.example.com), for caller_url and the broker's own origin (default: each request's Host) [BACKCHANNEL_PUBLIC_URL]")
	fs.IntVar(&c.maxSessions, "max-sessions-per-tenant", maxSessions, "open sessions per tenant; one more gets limit_exceeded (HTTP 429) [BACKCHANNEL_MAX_SESSIONS_PER_TENANT]")
	fs.IntVar(&c.maxHostSlots, "max-host-slots", maxHostSlots, "host slots per session [BACKCHANNEL_MAX_HOST_SLOTS]")
	fs.Func("timeline-max-bytes", "a session's timeline size past which entry details are cut to 256 bytes (bytes, or with KiB/MiB/GiB; default 4MiB) [BACKCHANNEL_TIMELINE_MAX_BYTES]", func(v string) error {
		n, err := parseSize(v)
		c.timelineMax = n
		return err
	})
	fs.IntVar(&c.maxFollowers, "max-timeline-followers", maxFollowers, "?follow=1 timeline streams per session [BACKCHANNEL_MAX_TIMELINE_FOLLOWERS]")
	fs.StringVar(&c.pprofAddr, "pprof-addr", envOr("BACKCHANNEL_PPROF_ADDR", ""), "serve Go's profiles (/debug/pprof/, block and mutex profiles on) on this address, apart from the broker's; keep it private (default: off) [BACKCHANNEL_PPROF_ADDR]")
	fs.IntVar(&c.gcPercent, "gc-percent", gcPercent, "the Go collector's target percentage, as GOGC (default 200; 0 leaves it to GOGC, the default when GOGC is set) [BACKCHANNEL_GC_PERCENT]")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the process to this file until it exits (for profiling, e.g. under bench voice)")
	fs.StringVar(&c.nodeID, "node-id", envOr("BACKCHANNEL_NODE_ID", fmt.Sprintf("%s-%d", host, os.Getpid())), "this node's name [BACKCHANNEL_NODE_ID]")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	switch c.store {
	case "memory", "redis":
	default:
		return nil, fmt.Errorf("--store %q: want memory or redis", c.store)
	}
	switch c.model {
	case "scripted", "openai":
	default:
		return nil, fmt.Errorf("--model %q: want scripted or openai", c.model)
	}
	if c.model == "openai" && c.openAIKey == "" && strings.HasPrefix(c.openAIURL, "wss://api.openai.com") {
		return nil, errors.New("--model openai needs --openai-key (or BACKCHANNEL_OPENAI_KEY) for OpenAI's endpoint")
	}
	if c.resumeWindow <= 0 || c.backgroundAfter <= 0 {
		return nil, errors.New("--resume-window and --background-after must be positive")
	}
	if c.gcPercent < 0 {
		return nil, fmt.Errorf("--gc-percent %d: want a positive percentage, or 0 for GOGC's", c.gcPercent)
	}
	if err := c.checkWebRTCPorts(); err != nil {
		return nil, err
	}
	if c.publicURL != "" {
		if u, err := url.Parse(c.publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("--public-url %q: want http(s)://HOST[:PORT]", c.publicURL)
		}
	}
	if c.maxSessions <= 0 || c.maxHostSlots <= 0 || c.maxFollowers <= 0 || c.timelineMax <= 0 {
		return nil, errors.New("--max-sessions-per-tenant, --max-host-slots, --max-timeline-followers and --timeline-max-bytes must be positive")
	}
	for _, u := range strings.Split(c.rtcICEServers, ",") {
		u = strings.TrimSpace(u)
		if (strings.HasPrefix(u, "turn:") || strings.HasPrefix(u, "turns:")) && (c.rtcTURNUser == "" || c.rtcTURNPass == "") {
			return nil, fmt.Errorf("--webrtc-ice-servers %s: a TURN server needs --webrtc-turn-username and --webrtc-turn-credential", u)
		}
	}
	return c, nil
}

// checkWebRTCPorts checks the UDP port flags of WebRTC: ports are 0 (unset) to 65535; a range
// needs both ends, low to high; and one port for every caller excludes a range.
func (c *serveConfig) checkWebRTCPorts() error {
	for _, p := range []struct {
		flag string
		port int
	}{{"--webrtc-udp-port", c.rtcUDPPort}, {"--webrtc-udp-port-min", c.rtcUDPPortMin}, {"--webrtc-udp-port-max", c.rtcUDPPortMax}} {
		if p.port < 0 || p.port > 65535 {
			return fmt.Errorf("%s %d: want a UDP port, 1 to 65535 (0: not set)", p.flag, p.port)
		}
	}
	hasRange := c.rtcUDPPortMin != 0 || c.rtcUDPPortMax != 0
	switch {
	case hasRange && c.rtcUDPPort != 0:
		return fmt.Errorf("--webrtc-udp-port %d excludes --webrtc-udp-port-min/max (%d-%d): serve every WebRTC caller on one port, or each on a port of the range, not both",
			c.rtcUDPPort, c.rtcUDPPortMin, c.rtcUDPPortMax)
	case hasRange && (c.rtcUDPPortMin == 0 || c.rtcUDPPortMax == 0):
		return fmt.Errorf("--webrtc-udp-port-min %d and --webrtc-udp-port-max %d: a UDP port range needs both", c.rtcUDPPortMin, c.rtcUDPPortMax)
	case c.rtcUDPPortMin > c.rtcUDPPortMax:
		return fmt.Errorf("--webrtc-udp-port-min %d is above --webrtc-udp-port-max %d", c.rtcUDPPortMin, c.rtcUDPPortMax)
	}
	return nil
}

// origins lists the --allowed-origins.
func (c *serveConfig) origins() []string {
	var out []string
	for _, o := range strings.Split(c.allowedOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, strings.TrimRight(o, "/"))
		}
	}
	return out
}

// parseSize reads a size in bytes: a positive integer, optionally with the suffix KiB, MiB or
// GiB (also KB, MB, GB, K, M, G — all powers of 1024).
func parseSize(v string) (int, error) {
	s := strings.TrimSpace(v)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB or GiB)", v)
	}
	return n * mult, nil
}

// isLoopback reports whether a listen address is on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serve(args []string) error {
	c, err := parseServe(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	setGCPercent(c.gcPercent)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", c.nodeID)
	keys, err := broker.ParseAPIKeys(c.apiKeys)
	if err != nil {
		return err
	}
	devMode := len(keys) == 0
	if devMode {
		if !isLoopback(c.addr) {
			return fmt.Errorf("no --api-keys and --addr %s is not loopback: refusing to start without API keys", c.addr)
		}
		keys = map[string]string{"dev": "dev"}
		fmt.Println("backchannel: no --api-keys given; on loopback, tenant dev has the API key dev")
	}
	if c.pprofAddr != "" {
		stopPprof, err := servePprof(c.pprofAddr, pprofBlockRate, pprofMutexFraction, log)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	var store cluster.Store
	var closeStore func()
	switch c.store {
	case "memory":
		store, closeStore = memstore.New(nil), func() {}
	case "redis":
		rdb, err := redisClient(c.redisURL)
		if err != nil {
			return fmt.Errorf("--redis-url %q: %v", c.redisURL, err)
		}
		// go-redis logs to stderr by itself: its lines go to slog instead, and none while the
		// start-up ping runs, whose failure is the one-line reason serve exits with.
		rlog := &redisLogger{log: log}
		redis.SetLogger(rlog)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = rdb.Ping(ctx).Err()
		cancel()
		if err != nil {
			_ = rdb.Close()
			return fmt.Errorf("redis at %s is not reachable: %v", c.redisURL, err)
		}
		rlog.started.Store(true)
		rs, err := redisstore.New(redisstore.Options{Client: rdb})
		if err != nil {
			return err
		}
		store, closeStore = rs, func() { _ = rs.Close(); _ = rdb.Close() }
	}
	defer closeStore()

	cfg := broker.Config{APIKeys: keys, ResumeWindow: c.resumeWindow, BackgroundAfter: c.backgroundAfter, MCPIdle: c.mcpIdle, NodeID: c.nodeID,
		AllowedOrigins: c.origins(), LoopbackHostsOnly: devMode, PublicURL: strings.TrimRight(c.publicURL, "/"),
		Limits: broker.Limits{MaxSessionsPerTenant: c.maxSessions, MaxHostSlots: c.maxHostSlots,
			TimelineMaxBytes: c.timelineMax, MaxTimelineFollowers: c.maxFollowers},
		Logger: log, DefaultModel: c.model, Models: map[string]model.Factory{
			"scripted": scripted.New,
			"openai": openai.New(openai.Options{URL: c.openAIURL, APIKey: c.openAIKey, Model: c.openAIModel,
				Logger: log}),
		}}
	if c.judgeURL != "" {
		cfg.Verifier = &permissions.LLMJudge{URL: c.judgeURL, APIKey: c.judgeKey, Model: c.judgeModel}
	}
	node := broker.NewNode(cfg, store)
	wsh := ws.NewHandler(node, ws.Options{Logger: log})
	mcph := mcp.New(node, log)
	rtc, err := bcwebrtc.NewHandler(node, c.webrtcOptions(log))
	if err != nil {
		return err // "webrtc: …"
	}
	handler := node.Handler(wsh, func(mux *http.ServeMux) {
		routes(mux)
		mux.Handle("/mcp", mcph)
		rtc.Register(mux)
	})

	// The signals are caught before the port accepts connections: a SIGTERM sent as soon as the
	// port answers shuts down gracefully (exit 0), never kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %v", c.addr, err)
	}
	node.Advertise(advertiseURL(ln.Addr().(*net.TCPAddr)))
	srv := broker.NewHTTPServer(handler, broker.HTTPLimits{}) // the limits of SPEC 18
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		if err := node.Run(runCtx); err != nil {
			log.Error("deadline scheduler stopped", "err", err)
		}
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("backchannel listening on http://%s\n", displayAddr(ln.Addr()))

	select {
	case err := <-served:
		return fmt.Errorf("serve: %v", err)
	case <-ctx.Done():
	}
	stop() // a second SIGINT or SIGTERM during the graceful shutdown ends the process at once
	log.Info("shutting down", "store", c.store)
	shutCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// With the memory store nothing outlives the process: every session ends (reason ended).
	// With Redis the sessions and jobs live on: connections are closed with 1012 to resume
	// elsewhere.
	if err := node.Shutdown(shutCtx, c.store == "memory"); err != nil {
		log.Warn("shutdown did not finish", "err", err)
	}
	wsh.CloseAll(broker.StatusServiceRestart, "service restart")
	rtc.Close()
	_ = srv.Shutdown(shutCtx)
	_ = wsh.Wait(shutCtx) // the last frames and close frames are written
	_ = rtc.Wait(shutCtx)
	cancelRun()
	select { // the deadline scheduler stops before the store closes
	case <-ran:
	case <-time.After(5 * time.Second):
		log.Warn("the deadline scheduler did not stop within 5s")
	}
	return nil
}

// redisLogger passes go-redis's log lines to slog as warnings once started is set, and drops
// them before.
type redisLogger struct {
	log     *slog.Logger
	started atomic.Bool
}

// Printf logs one line of go-redis.
func (l *redisLogger) Printf(_ context.Context, format string, v ...any) {
	if l.started.Load() {
		l.log.Warn("redis: " + fmt.Sprintf(format, v...))
	}
}

// displayAddr renders the real listen address (the real port when --addr asked for port 0).
func displayAddr(a net.Addr) string {
	s := a.String()
	if strings.HasPrefix(s, "[::]:") {
		return "127.0.0.1" + s[4:]
	}
	return s
}

// envInt returns the environment variable's value as an integer, or def.
func envInt(name string, def int) (int, error) {
	return envParsed(name, def, func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, errors.New("not an integer")
		}
		return n, nil
	})
}

// webrtcOptions turns the --webrtc-* flags into the transport's options (none: loopback only).
func (c *serveConfig) webrtcOptions(log *slog.Logger) bcwebrtc.Options {
	o := bcwebrtc.Options{UDPMuxPort: c.rtcUDPPort, UDPPortMin: uint16(c.rtcUDPPortMin), UDPPortMax: uint16(c.rtcUDPPortMax),
		Logger: log}
	for _, u := range strings.Split(c.rtcICEServers, ",") {
		if u = strings.TrimSpace(u); u != "" {
			s := pionwebrtc.ICEServer{URLs: []string{u}}
			if strings.HasPrefix(u, "turn:") || strings.HasPrefix(u, "turns:") {
				s.Username, s.Credential = c.rtcTURNUser, c.rtcTURNPass
			}
			o.ICEServers = append(o.ICEServers, s)
		}
	}
	if c.rtcPublicIP != "" {
		o.AddressRewriteRules = []pionwebrtc.ICEAddressRewriteRule{{External: []string{c.rtcPublicIP}, AsCandidateType: pionwebrtc.ICECandidateTypeHost}}
	}
	return o
}

// advertiseURL is where the other nodes sharing the store reach this node's HTTP server: the
// listen address, or, when it is every interface, the host name with the port.
func advertiseURL(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
}
