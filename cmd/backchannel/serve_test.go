package main

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// serveSetting is one setting of `backchannel serve`: its flag, its environment variable, its
// default (SPEC 18), another value and how the parsed configuration shows it.
type serveSetting struct {
	flag, env string
	def       any    // the default, as the configuration holds it
	value     string // another value, given on the command line or in the environment
	want      any    // value, as the configuration holds it
	get       func(*serveConfig) any
}

// serveSettings lists the settings of SPEC 18's table (the environment variables it names, and
// BACKCHANNEL_* for the rest), then the ones this broker adds.
func serveSettings() []serveSetting {
	host, _ := os.Hostname()
	return []serveSetting{
		{"addr", "BACKCHANNEL_ADDR", "127.0.0.1:8080", "127.0.0.1:9090", "127.0.0.1:9090", func(c *serveConfig) any { return c.addr }},
		{"store", "BACKCHANNEL_STORE", "memory", "redis", "redis", func(c *serveConfig) any { return c.store }},
		{"redis-url", "BACKCHANNEL_REDIS_URL", "redis://127.0.0.1:6379/0", "redis://10.0.0.5:6380/2", "redis://10.0.0.5:6380/2", func(c *serveConfig) any { return c.redisURL }},
		{"api-keys", "BACKCHANNEL_API_KEYS", "", "acme=k1,globex=k2", "acme=k1,globex=k2", func(c *serveConfig) any { return c.apiKeys }},
		{"model", "BACKCHANNEL_MODEL", "scripted", "openai", "openai", func(c *serveConfig) any { return c.model }},
		{"openai-url", "BACKCHANNEL_OPENAI_URL", "wss://api.openai.com/v1/realtime", "ws://127.0.0.1:8090/v1/realtime", "ws://127.0.0.1:8090/v1/realtime", func(c *serveConfig) any { return c.openAIURL }},
		{"openai-key", "BACKCHANNEL_OPENAI_KEY", "", "sk-test", "sk-test", func(c *serveConfig) any { return c.openAIKey }},
		{"openai-model", "BACKCHANNEL_OPENAI_MODEL", "gpt-realtime", "gpt-realtime-mini", "gpt-realtime-mini", func(c *serveConfig) any { return c.openAIModel }},
		{"resume-window", "BACKCHANNEL_RESUME_WINDOW", 2 * time.Minute, "90s", 90 * time.Second, func(c *serveConfig) any { return c.resumeWindow }},
		{"background-after", "BACKCHANNEL_BACKGROUND_AFTER", 2 * time.Second, "500ms", 500 * time.Millisecond, func(c *serveConfig) any { return c.backgroundAfter }},
		{"node-id", "BACKCHANNEL_NODE_ID", fmt.Sprintf("%s-%d", host, os.Getpid()), "node-b", "node-b", func(c *serveConfig) any { return c.nodeID }},
		{"judge-url", "BACKCHANNEL_JUDGE_URL", "", "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", func(c *serveConfig) any { return c.judgeURL }},
		{"judge-key", "BACKCHANNEL_JUDGE_KEY", "", "jk", "jk", func(c *serveConfig) any { return c.judgeKey }},
		{"judge-model", "BACKCHANNEL_JUDGE_MODEL", "gpt-4.1-mini", "judge-2", "judge-2", func(c *serveConfig) any { return c.judgeModel }},
		{"webrtc-udp-port", "BACKCHANNEL_WEBRTC_UDP_PORT", 0, "50000", 50000, func(c *serveConfig) any { return c.rtcUDPPort }},
		{"webrtc-public-ip", "BACKCHANNEL_WEBRTC_PUBLIC_IP", "", "203.0.113.7", "203.0.113.7", func(c *serveConfig) any { return c.rtcPublicIP }},
		{"webrtc-ice-servers", "BACKCHANNEL_WEBRTC_ICE_SERVERS", "", "stun:stun.example.com:3478", "stun:stun.example.com:3478", func(c *serveConfig) any { return c.rtcICEServers }},
		{"webrtc-turn-username", "BACKCHANNEL_WEBRTC_TURN_USERNAME", "", "u", "u", func(c *serveConfig) any { return c.rtcTURNUser }},
		{"webrtc-turn-credential", "BACKCHANNEL_WEBRTC_TURN_CREDENTIAL", "", "p", "p", func(c *serveConfig) any { return c.rtcTURNPass }},
		{"gc-percent", "BACKCHANNEL_GC_PERCENT", 200, "400", 400, func(c *serveConfig) any { return c.gcPercent }},
	}
}

// TestServeGCPercentLeavesGOGC checks that GOGC in the environment, which the Go runtime has
// read already, is left alone unless --gc-percent (or its variable) is given.
func TestServeGCPercentLeavesGOGC(t *testing.T) {
	clearServeEnv(t)
	t.Setenv("GOGC", "150")
	if c, err := parseServe(nil); err != nil || c.gcPercent != 0 {
		t.Errorf("GOGC=150 without --gc-percent: gc percent %d, %v; want 0 (the runtime's)", c.gcPercent, err)
	}
	if c, err := parseServe([]string{"--gc-percent", "300"}); err != nil || c.gcPercent != 300 {
		t.Errorf("GOGC=150 --gc-percent 300: gc percent %d, %v; want 300", c.gcPercent, err)
	}
}

// clearServeEnv unsets every BACKCHANNEL_* variable, and GOGC, for the test (restored when it
// ends).
func clearServeEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "BACKCHANNEL_") || name == "GOGC" {
			t.Setenv(name, "")
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestServeFlagDefaults checks that every flag of SPEC 18 exists with its default when neither
// the flag nor its environment variable is given.
func TestServeFlagDefaults(t *testing.T) {
	clearServeEnv(t)
	c, err := parseServe(nil)
	if err != nil {
		t.Fatalf("parseServe with no flags: %v", err)
	}
	for _, s := range serveSettings() {
		if got := s.get(c); !reflect.DeepEqual(got, s.def) {
			t.Errorf("--%s defaults to %#v, want %#v (SPEC 18)", s.flag, got, s.def)
		}
	}
}

// TestServeFlagsAndEnvironment checks that each setting is read from its flag and from its
// environment variable, and that the flag wins over the variable.
func TestServeFlagsAndEnvironment(t *testing.T) {
	for _, s := range serveSettings() {
		t.Run(s.flag, func(t *testing.T) {
			clearServeEnv(t)
			// --model openai needs a key for OpenAI's endpoint.
			var extra []string
			if s.flag == "model" {
				extra = []string{"--openai-key", "sk-test"}
			}
			c, err := parseServe(append([]string{"--" + s.flag, s.value}, extra...))
			if err != nil {
				t.Fatalf("--%s %s: %v", s.flag, s.value, err)
			}
			if got := s.get(c); !reflect.DeepEqual(got, s.want) {
				t.Errorf("--%s %s: got %#v, want %#v", s.flag, s.value, got, s.want)
			}

			t.Setenv(s.env, s.value)
			if s.flag == "model" {
				t.Setenv("BACKCHANNEL_OPENAI_KEY", "sk-test")
			}
			c, err = parseServe(nil)
			if err != nil {
				t.Fatalf("%s=%s: %v", s.env, s.value, err)
			}
			if got := s.get(c); !reflect.DeepEqual(got, s.want) {
				t.Errorf("%s=%s: got %#v, want %#v", s.env, s.value, got, s.want)
			}

			// The flag, given as its default, wins over the environment.
			c, err = parseServe([]string{"--" + s.flag, flagText(s.def)})
			if err != nil {
				t.Fatalf("%s=%s --%s %v: %v", s.env, s.value, s.flag, s.def, err)
			}
			if got := s.get(c); !reflect.DeepEqual(got, s.def) {
				t.Errorf("%s=%s --%s %v: got %#v, want the flag's value", s.env, s.value, s.flag, s.def, got)
			}
		})
	}
}

// flagText renders a default as a flag value.
func flagText(v any) string {
	if d, ok := v.(time.Duration); ok {
		return d.String()
	}
	return fmt.Sprint(v)
}

// TestServeRejectsBadConfiguration checks the configurations serve refuses before it starts:
// each names what is wrong in one line.
func TestServeRejectsBadConfiguration(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--store", "postgres"}, want: `--store "postgres": want memory or redis`},
		{args: []string{"--model", "claude"}, want: `--model "claude": want scripted or openai`},
		{args: []string{"--model", "openai"}, want: "--model openai needs --openai-key"},
		{args: []string{"--resume-window", "0s"}, want: "must be positive"},
		{env: map[string]string{"BACKCHANNEL_RESUME_WINDOW": "two minutes"}, want: `BACKCHANNEL_RESUME_WINDOW="two minutes"`},
		{env: map[string]string{"BACKCHANNEL_BACKGROUND_AFTER": "soon"}, want: `BACKCHANNEL_BACKGROUND_AFTER="soon"`},
		{env: map[string]string{"BACKCHANNEL_WEBRTC_UDP_PORT": "x"}, want: `BACKCHANNEL_WEBRTC_UDP_PORT="x": not an integer`},
		{args: []string{"--webrtc-ice-servers", "turn:turn.example.com:3478"}, want: "a TURN server needs --webrtc-turn-username and --webrtc-turn-credential"},
		{args: []string{"--gc-percent", "-5"}, want: "--gc-percent -5: want a positive percentage"},
		{args: []string{"extra"}, want: "unexpected arguments [extra]"},
	} {
		t.Run(c.want, func(t *testing.T) {
			clearServeEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := parseServe(c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("parseServe(%q) with %v: %v, want one line containing %q", c.args, c.env, err, c.want)
			}
		})
	}
}

// TestParseSize reads the sizes of --timeline-max-bytes: bytes, or with a binary suffix.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"4MiB": 4 << 20, "512KiB": 512 << 10, "1GiB": 1 << 30, "100": 100, " 2 MB": 2 << 20, "3K": 3 << 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "4 MiBs", "1.5MiB", "MiB", "99999999999GiB"} {
		if n, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, n)
		}
	}
}
