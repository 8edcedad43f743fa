package webrtc

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/webrtc/v4"
)

// Options configure the transport. The zero value serves loopback callers only (the broker's
// default address is 127.0.0.1): see IPFilter.
type Options struct {
	// ICEServers are the STUN/TURN servers the broker gathers server-reflexive and relay
	// candidates from (none by default).
	ICEServers []webrtc.ICEServer
	// UDPPortMin and UDPPortMax bound the UDP ports of the broker's ICE candidates, one port per
	// peer connection (0: any ephemeral port).
	UDPPortMin, UDPPortMax uint16
	// UDPMuxPort, when set, serves every peer connection on this one UDP port (pion's
	// ice-single-port), on every address IPFilter keeps. It takes precedence over the port range.
	UDPMuxPort int
	// AddressRewriteRules publish other addresses than the local ones in the broker's
	// candidates, e.g. the public IP of a host behind a 1:1 NAT (a cloud VM):
	// {External: []string{"203.0.113.7"}, AsCandidateType: webrtc.ICECandidateTypeHost}.
	AddressRewriteRules []webrtc.ICEAddressRewriteRule
	// NetworkTypes are the candidate network types (default UDP4 only).
	NetworkTypes []webrtc.NetworkType
	// IPFilter chooses the local addresses offered as host candidates (loopback addresses
	// included when it keeps them). When nil and nothing above is configured, only loopback
	// IPv4 is offered — the development setup that needs no network; when nil and anything
	// above is configured, every non-loopback address is offered.
	IPFilter func(net.IP) bool

	// HelloTimeout is how long a new peer connection has, from the answer, to open its frames
	// data channel and send hello (SPEC 3.2: default 10 s).
	HelloTimeout time.Duration
	// GatherTimeout bounds ICE candidate gathering before the answer is sent (default 10 s).
	GatherTimeout time.Duration
	// ICEDisconnectedTimeout, ICEFailedTimeout and ICEKeepaliveInterval are pion's ICE timers
	// (defaults 5 s, 25 s, 2 s). A peer connection whose ICE fails is a dropped transport.
	ICEDisconnectedTimeout, ICEFailedTimeout, ICEKeepaliveInterval time.Duration
	// MaxMessageBytes is the largest data-channel message read at all, announced to the peer
	// as the SCTP max-message-size; a bigger one closes the peer connection (a drop). Messages
	// over the broker's frame limit but under this one are answered with limit_exceeded
	// (default: four times the frame limit).
	MaxMessageBytes int
	// BufferedHigh is how many bytes may wait unacknowledged in the data channel before the
	// writer stops handing it more (default 1 MiB); it resumes at a quarter of it. Frames wait
	// in the connection's send queue meanwhile, bounded by the broker's SendQueueBytes.
	BufferedHigh int
	// Logger receives the transport's logs (default slog.Default()); pion's own errors are
	// logged at Warn, its warnings at Debug.
	Logger *slog.Logger
}

// configured reports whether anything about the network was configured.
func (o *Options) configured() bool {
	return len(o.ICEServers) > 0 || o.UDPPortMin != 0 || o.UDPPortMax != 0 || o.UDPMuxPort != 0 ||
		len(o.AddressRewriteRules) > 0
}

// loopbackIPv4 keeps loopback IPv4 addresses only (the development default).
func loopbackIPv4(ip net.IP) bool { return ip.IsLoopback() && ip.To4() != nil }

func (o *Options) setDefaults(frameLimit int) {
	if o.HelloTimeout <= 0 {
		o.HelloTimeout = 10 * time.Second
	}
	if o.GatherTimeout <= 0 {
		o.GatherTimeout = 10 * time.Second
	}
	if o.ICEDisconnectedTimeout <= 0 {
		o.ICEDisconnectedTimeout = 5 * time.Second
	}
	if o.ICEFailedTimeout <= 0 {
		o.ICEFailedTimeout = 25 * time.Second
	}
	if o.ICEKeepaliveInterval <= 0 {
		o.ICEKeepaliveInterval = 2 * time.Second
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 4 * frameLimit
	}
	if o.BufferedHigh <= 0 {
		o.BufferedHigh = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if len(o.NetworkTypes) == 0 {
		o.NetworkTypes = []webrtc.NetworkType{webrtc.NetworkTypeUDP4}
	}
}

// api builds the pion API every peer connection of the handler shares: PCMU as the only
// audio codec, RTCP reports, and the ICE settings of the options. It also returns the UDP mux
// when one was asked for (closed by the handler at the end).
func (o *Options) api() (*webrtc.API, ice.UDPMux, error) {
	se := webrtc.SettingEngine{LoggerFactory: pionLogs{o.Logger}}
	se.SetNetworkTypes(o.NetworkTypes)
	// A server has no use for mDNS host names of its own, and needs no multicast socket.
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	filter := o.IPFilter
	loopback := filter != nil // a filter of the operator's decides about loopback addresses too
	if filter == nil && !o.configured() {
		filter, loopback = loopbackIPv4, true
	}
	if filter != nil {
		se.SetIPFilter(filter)
	}
	se.SetIncludeLoopbackCandidate(loopback)
	se.SetICETimeouts(o.ICEDisconnectedTimeout, o.ICEFailedTimeout, o.ICEKeepaliveInterval)
	se.SetSCTPMaxMessageSize(uint32(o.MaxMessageBytes))
	// A message is delivered only whole, so the receive buffer must hold the largest one.
	se.SetSCTPMaxReceiveBufferSize(uint32(max(o.MaxMessageBytes+64<<10, 1<<20)))
	if len(o.AddressRewriteRules) > 0 {
		if err := se.SetICEAddressRewriteRules(o.AddressRewriteRules...); err != nil {
			return nil, nil, fmt.Errorf("webrtc: address rewrite rules: %w", err)
		}
	}
	var mux ice.UDPMux
	switch {
	case o.UDPMuxPort != 0:
		opts := []ice.UDPMuxFromPortOption{ice.UDPMuxFromPortWithNetworks(iceNetworks(o.NetworkTypes)...),
			ice.UDPMuxFromPortWithLogger(pionLogs{o.Logger}.NewLogger("udpmux"))}
		if filter != nil {
			opts = append(opts, ice.UDPMuxFromPortWithIPFilter(filter))
		}
		if loopback {
			opts = append(opts, ice.UDPMuxFromPortWithLoopback())
		}
		m, err := ice.NewMultiUDPMuxFromPort(o.UDPMuxPort, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("webrtc: UDP port %d: %w", o.UDPMuxPort, err)
		}
		se.SetICEUDPMux(m)
		mux = m
	case o.UDPPortMin != 0 || o.UDPPortMax != 0:
		if err := se.SetEphemeralUDPPortRange(o.UDPPortMin, o.UDPPortMax); err != nil {
			return nil, nil, fmt.Errorf("webrtc: UDP port range %d-%d: %w", o.UDPPortMin, o.UDPPortMax, err)
		}
	}
	me := &webrtc.MediaEngine{}
	if err := me.RegisterCodec(webrtc.RTPCodecParameters{RTPCodecCapability: pcmu, PayloadType: 0}, webrtc.RTPCodecTypeAudio); err != nil {
		closeMux(mux)
		return nil, nil, fmt.Errorf("webrtc: registering PCMU: %w", err)
	}
	ir := &interceptor.Registry{}
	if err := webrtc.ConfigureRTCPReports(ir); err != nil {
		closeMux(mux)
		return nil, nil, fmt.Errorf("webrtc: RTCP reports: %w", err)
	}
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir))
	return api, mux, nil
}

// pcmu is the one audio codec of the transport: G.711 µ-law, 8 kHz mono (DESIGN: the model's
// format too, so audio passes through without transcoding).
var pcmu = webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypePCMU, ClockRate: 8000, Channels: 1}

func iceNetworks(types []webrtc.NetworkType) []ice.NetworkType {
	out := make([]ice.NetworkType, 0, len(types))
	for _, t := range types {
		switch t {
		case webrtc.NetworkTypeUDP4:
			out = append(out, ice.NetworkTypeUDP4)
		case webrtc.NetworkTypeUDP6:
			out = append(out, ice.NetworkTypeUDP6)
		}
	}
	return out
}

func closeMux(m ice.UDPMux) {
	if m != nil {
		_ = m.Close()
	}
}
