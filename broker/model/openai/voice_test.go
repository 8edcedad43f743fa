package openai

import (
	"log/slog"
	"testing"

	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/broker/voicetest"
)

// TestVoiceScenarios runs the broker's voice scenario table (SPEC 8, 9, 11, 12) with the
// adapter as the session's model, connected to the simulator, over the memory store. Every
// event of every session is then checked against the published schema.
func TestVoiceScenarios(t *testing.T) {
	srv := sim.New(sim.Options{APIKey: testKey})
	t.Cleanup(func() {
		srv.Close()
		checkEvents(t, srv.Events())
		if n := countErrors(srv, codeActiveResponse); n > 0 {
			t.Errorf("the adapter provoked %s %d times", codeActiveResponse, n)
		}
	})
	newModel := New(Options{URL: srv.URL(), APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	voicetest.Run(t, "memory", newModel, false)
}
