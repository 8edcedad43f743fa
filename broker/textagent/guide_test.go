package textagent

import (
	"os"
	"strings"
	"testing"
)

// The text agents' guide (docs/textagent.md) quotes every fixed text the broker answers a text
// agent with, so an agent written from the guide alone can match on them.
func TestGuideQuotesEveryText(t *testing.T) {
	b, err := os.ReadFile("../../docs/textagent.md")
	if err != nil {
		t.Fatal(err)
	}
	guide := string(b)
	for _, text := range []string{
		MsgResultAlreadyConsumed, MsgResultAlreadyWaitedFor, MsgUnknownToolCallID,
		MsgNoBackgroundToolCall, MsgBareWaitAlreadyPending, MsgTimeoutMinutesInvalid,
		MsgToolCallCanceled, MsgToolCallIDEmpty, MsgToolCallAlreadyDone, MsgToolCallAlreadyCanceled,
		MsgToolCallCannotBeCanceled, BodyCancellationRequested, AdviceTimedWaits, StatusReminderPrompt,
		HeaderInternal, HeaderWaitOutcome, HeaderWaitReason, HeaderWaitMode, HeaderOriginalToolCallID,
		HeaderError, HeaderToolCallID, HeaderDurationSeconds, HeaderInputAvailable, HeaderTimedOut,
		HeaderAdvice, HeaderPendingPrompts, WaitModeExact, WaitModeAnyBackground,
		WaitOutcomeInterrupted, WaitReasonActivatingInput,
	} {
		if !strings.Contains(guide, text) {
			t.Errorf("docs/textagent.md does not quote %q", text)
		}
	}
}
