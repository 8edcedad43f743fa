package broker

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/broker/voice"
	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/narration"
	"github.com/backchannel-io/backchannel/permissions"
)

// Config configures a Node. The zero value of a field means its documented default.
type Config struct {
	// APIKeys maps an API key to its tenant (SPEC 3.5).
	APIKeys map[string]string
	// ResumeWindow is how long a dropped slot waits for its connection to come back, and how
	// long a session with nothing attached lives on (SPEC 10; default 2 min).
	ResumeWindow time.Duration
	// Heartbeat is the WebSocket ping interval (default 15 s); two missed pongs drop the transport.
	Heartbeat time.Duration
	// BackgroundAfter is when a text agent's unfinished call goes to the background (default 2 s).
	BackgroundAfter time.Duration
	// MCPIdle is how long an MCP session with no request and no open stream lives on before the
	// MCP facade closes it (SPEC 14: mcp_idle_ms, default 10 minutes).
	MCPIdle time.Duration
	// Limits are the limits of SPEC 2.
	Limits Limits
	// PublicURL is the base URL clients reach the broker at, for caller_url (default: taken
	// from each request's Host).
	PublicURL string
	// Logger receives the broker's logs (default slog.Default()).
	Logger *slog.Logger
	// Models are the voice models by kind (SPEC 3.1: scripted, openai); default: scripted only.
	Models map[string]model.Factory
	// DefaultModel is the kind of a session that names none (SPEC 18 --model; default scripted).
	DefaultModel string
	// Verifier judges permission replies (SPEC 12; default the rule-based verifier).
	Verifier permissions.Verifier
	// Clock tells the sessions the time and runs their timers (default SystemClock).
	Clock Clock
	// FloorGrace is how long after the caller stopped speaking the floor stays taken (SPEC 8
	// floor_grace_ms; default 400 ms).
	FloorGrace time.Duration
	// NarrationMaxWait is how long an item waits for a free floor (SPEC 8
	// narration_max_wait_ms; default 60 s).
	NarrationMaxWait time.Duration
	// ReaskAfter is when a delivered, unanswered interaction ask is asked again (SPEC 9; 30 s).
	ReaskAfter time.Duration
	// PermissionTimeout is how long a spoken permission ask waits for a clear answer, counted
	// from the end of the ask (or of its clarification); an ask left unanswered that long is
	// declined with reason permission_timeout (SPEC 5, 12; default 120 s).
	PermissionTimeout time.Duration
	// NodeID names this node among the nodes sharing a store (SPEC 18 --node-id; default
	// "node"); a random suffix makes each start of it a new address.
	NodeID string
	// FaultPoint, for fault tests only (nil otherwise), is called with the name of each point of
	// a session's work where a crash is most telling — FaultBeforeJournal, FaultBeforeSend,
	// FaultBeforeWelcome — on the session's loop: a hook that blocks there holds the session as
	// a node that died at that instant would leave it (the test then kills the node:
	// brokertest.Kill).
	FaultPoint func(point string)
	// HoldTTL is how long a node's claim on its sessions, and its liveness, last without
	// renewal (renewed every third of it; default 10 s): a node that crashed is known dead
	// after that long (SPEC 15).
	HoldTTL time.Duration
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed to open WebSockets,
	// MCP sessions and HTTP API requests; "*" allows any (SPEC 18 --allowed-origins). A request
	// whose Origin header is neither the broker's own origin nor listed gets 403.
	AllowedOrigins []string
	// LoopbackHostsOnly makes the broker accept only Host headers that name a loopback address
	// or localhost (SPEC 18: set in dev mode, with no --api-keys), so that a web page cannot
	// drive a developer's broker through DNS rebinding.
	LoopbackHostsOnly bool
}

// Limits are the limits of SPEC 2 (all configurable).
type Limits struct {
	MaxFrameBytes   int     // default 1 MiB
	MaxPayloadBytes int     // arguments / output; default 512 KiB
	MaxTools        int     // per session; default 64
	MaxOpenJobs     int     // per session; default 256
	FramesPerSecond float64 // sustained, per connection; default 100
	FrameBurst      int     // default 200
	OutboxFrames    int     // per slot; default 1000
	OutboxBytes     int     // per slot; default 16 MiB
	SendQueueBytes  int     // per connection, before it is closed as a slow consumer; default 32 MiB (twice the outbox, so a full replay fits)
	MaxViolations   int     // frames over a limit with no second free of them in between before the connection is closed with 1008; default 100
	// MailboxFrames and MailboxBytes bound what one connection may have queued for its session:
	// past them the connection is not read until the session catches up (SPEC 2; default 64
	// frames, 4 MiB).
	MailboxFrames int
	MailboxBytes  int
	// MaxSessionsPerTenant is the number of open sessions per tenant; one more is
	// limit_exceeded, HTTP 429 (SPEC 18 --max-sessions-per-tenant; default 10000).
	MaxSessionsPerTenant int
	// MaxHostSlots is the number of host slots per session (SPEC 18 --max-host-slots; default 16).
	MaxHostSlots int
	// TimelineMaxBytes is a session's timeline size past which entries keep their kind and ids
	// but their detail strings are cut to 256 bytes (SPEC 18 --timeline-max-bytes; default 4 MiB).
	TimelineMaxBytes int
	// MaxTimelineFollowers is the number of ?follow=1 timeline streams per session (SPEC 18
	// --max-timeline-followers; default 8).
	MaxTimelineFollowers int
}

func (c *Config) setDefaults() {
	if c.ResumeWindow <= 0 {
		c.ResumeWindow = 2 * time.Minute
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.MCPIdle <= 0 {
		c.MCPIdle = DefaultMCPIdle
	}
	if c.BackgroundAfter <= 0 {
		c.BackgroundAfter = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Models == nil {
		c.Models = map[string]model.Factory{"scripted": scripted.New}
	}
	if c.DefaultModel == "" {
		c.DefaultModel = "scripted"
	}
	if c.Verifier == nil {
		c.Verifier = permissions.NewRules()
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.FloorGrace <= 0 {
		c.FloorGrace = narration.DefaultGrace
	}
	if c.NarrationMaxWait <= 0 {
		c.NarrationMaxWait = voice.DefaultMaxWait
	}
	if c.ReaskAfter <= 0 {
		c.ReaskAfter = voice.DefaultReaskAfter
	}
	if c.NodeID == "" {
		c.NodeID = "node"
	}
	if c.HoldTTL <= 0 {
		c.HoldTTL = 10 * time.Second
	}
	if c.PermissionTimeout <= 0 {
		c.PermissionTimeout = jobs.DefaultPermissionTimeout
	}
	l := &c.Limits
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxFrameBytes, 1<<20)
	def(&l.MaxPayloadBytes, 512<<10)
	def(&l.MaxTools, 64)
	def(&l.MaxOpenJobs, 256)
	def(&l.FrameBurst, 200)
	def(&l.OutboxFrames, 1000)
	def(&l.OutboxBytes, 16<<20)
	def(&l.SendQueueBytes, 32<<20)
	def(&l.MaxViolations, 100)
	def(&l.MailboxFrames, 64)
	def(&l.MailboxBytes, 4<<20)
	def(&l.MaxSessionsPerTenant, 10000)
	def(&l.MaxHostSlots, 16)
	def(&l.TimelineMaxBytes, 4<<20)
	def(&l.MaxTimelineFollowers, 8)
	if l.FramesPerSecond <= 0 {
		l.FramesPerSecond = 100
	}
}

// ParseAPIKeys parses `tenant=key,tenant2=key2` (SPEC 18) into a key → tenant map.
func ParseAPIKeys(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		tenant, key, ok := strings.Cut(part, "=")
		tenant, key = strings.TrimSpace(tenant), strings.TrimSpace(key)
		if !ok || tenant == "" || key == "" {
			return nil, fmt.Errorf("api keys: %q is not tenant=key", part)
		}
		if strings.ContainsAny(tenant, "{}:") {
			return nil, fmt.Errorf("api keys: tenant name %q may not contain '{', '}' or ':'", tenant)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("api keys: the key of tenant %q is used twice", tenant)
		}
		out[key] = tenant
	}
	return out, nil
}

// tenants lists the tenants of the configured keys.
func (c *Config) tenants() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range c.APIKeys {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// engineOptions are the job engine options the broker needs.
func engineOptions(c *Config, onChange func(jobs.Change)) jobs.Options {
	return jobs.Options{Tenants: c.tenants(), OnChange: onChange, Logger: c.Logger, PermissionTimeout: c.PermissionTimeout, TimelineMaxBytes: c.Limits.TimelineMaxBytes}
}

// DefaultMCPIdle is the default of Config.MCPIdle (SPEC 14: mcp_idle_ms 600000).
const DefaultMCPIdle = 10 * time.Minute
