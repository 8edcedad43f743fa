package broker

import "time"

// VoiceMetrics observes the voice hot path for a transport (the WebRTC peer reads caller RTP
// and writes agent RTP, so only it knows those moments). Every method is safe for concurrent
// use and allocates nothing: it runs 50 times a second per caller in each direction.
type VoiceMetrics struct {
	clock Clock
	m     *metrics
}

// VoiceMetrics returns the node's voice metrics.
func (n *Node) VoiceMetrics() *VoiceMetrics { return &VoiceMetrics{clock: n.cfg.Clock, m: n.metrics} }

// Now is the time of the node's clock: what the due times of agent audio and the read times
// of caller audio are measured in.
func (vm *VoiceMetrics) Now() time.Time { return vm.clock.Now() }

// AudioWritten observes one frame of agent audio written to its caller, which its pacing had due
// at due.
func (vm *VoiceMetrics) AudioWritten(due time.Time) { vm.m.audioWritten(vm.clock.Now().Sub(due)) }

// audioWritten counts one frame of agent audio written to its caller delay after it was due.
func (m *metrics) audioWritten(delay time.Duration) {
	m.audioOutDelay.Observe(delay.Seconds())
	m.audioOut.Inc()
}

// AudioDropped counts one frame of agent audio the transport could not take.
func (vm *VoiceMetrics) AudioDropped() { vm.m.audioOutDropped.Inc() }

// AudioDueSender is a Transport that writes agent audio itself, in real time, and observes its
// delay with VoiceMetrics.AudioWritten (the WebRTC peer). due is when the frame is due by the
// pacing schedule. A Transport without it counts as written when SendAudio returns.
type AudioDueSender interface {
	SendAudioDue(chunk []byte, due time.Time)
}

// AudioReceiver is a Connection that takes the moment its caller audio was read (on the node's
// clock, VoiceMetrics.Now), for the inbound delay. ReceiveAudio reads it as the moment of the
// call.
type AudioReceiver interface {
	ReceiveAudioAt(data []byte, read time.Time)
}
