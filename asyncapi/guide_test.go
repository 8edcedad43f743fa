package asyncapi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/backchannel-io/backchannel/frames"
)

// This file checks the frames quoted in docs/protocol.md, the protocol guide, and in
// docs/textagent.md, the text agents' guide, against package frames and the document, so the
// guides cannot drift from the code either.

// guidePath is the protocol guide (for hosts); agentGuidePath the text agents' guide.
const (
	guidePath      = "../docs/protocol.md"
	agentGuidePath = "../docs/textagent.md"
)

// guideFrame is one frame quoted in the guide: a line "→ JSON" (host → broker) or "← JSON"
// (broker → host) inside a code block.
type guideFrame struct {
	line int
	dir  frames.Direction
	json []byte
}

// guideFrames reads the quoted frames of the protocol guide.
func guideFrames(t *testing.T) (text string, out []guideFrame) {
	t.Helper()
	return quotedFrames(t, guidePath)
}

// quotedFrames reads the text of the guide at path and the frames it quotes.
func quotedFrames(t *testing.T, path string) (text string, out []guideFrame) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	inCode := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if !inCode {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "→ "); ok {
			out = append(out, guideFrame{n, frames.ClientToBroker, []byte(rest)})
		} else if rest, ok := strings.CutPrefix(line, "← "); ok {
			out = append(out, guideFrame{n, frames.BrokerToClient, []byte(rest)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return string(b), out
}

// callIDMember matches the call_id members of a frame.
var callIDMember = regexp.MustCompile(`"call_id":"([^"]*)"`)

// brokerCallID is the form of a broker call id (SPEC 5).
var brokerCallID = regexp.MustCompile(`^call_[a-z2-7]{20}$`)

// TestGuideFramesAreValid decodes every frame the protocol guide quotes, checks its direction
// and its call ids, and validates it against its message in channel host; and the same for the
// text agents' guide and channel agent.
func TestGuideFramesAreValid(t *testing.T) {
	checkQuotedFrames(t, guidePath, "host", 40)
	checkQuotedFrames(t, agentGuidePath, "agent", 20)
}

// checkQuotedFrames checks the frames the guide at path quotes against channel: it must quote at
// least least frames; the host guide quotes every frame type of its channel, and its call ids
// are broker call ids (an agent's own call ids are its to choose).
func checkQuotedFrames(t *testing.T, path, channel string, least int) {
	t.Helper()
	_, quoted := quotedFrames(t, path)
	if len(quoted) < least {
		t.Fatalf("%s quotes only %d frames", repoPath(path), len(quoted))
	}
	schemas := payloadSchemas(t)
	seen := map[string]bool{}
	for _, q := range quoted {
		at := fmt.Sprintf("%s:%d", repoPath(path), q.line)
		f, err := frames.Decode(q.json)
		if err != nil {
			t.Errorf("%s: frames.Decode: %v", at, err)
			continue
		}
		typ := f.FrameType()
		seen[typ] = true
		if dir, _ := frames.DirectionOf(typ); dir != q.dir {
			t.Errorf("%s: %s is sent by the %s, but the guide's arrow says %s", at, typ, dir, q.dir)
		}
		sch := schemas[typ][messageKey(channel, typ)]
		if sch == nil {
			t.Errorf("%s: %s is no frame of channel %s", at, typ, channel)
			continue
		}
		if err := sch.Validate(decodeAny(t, q.json)); err != nil {
			t.Errorf("%s: %s does not validate against its message: %v", at, typ, err)
		}
		for _, m := range callIDMember.FindAllSubmatch(q.json, -1) {
			if channel == "host" && !brokerCallID.Match(m[1]) {
				t.Errorf("%s: call_id %q is not call_ + 20 characters of a-z2-7", at, m[1])
			}
		}
	}
	for _, c := range channels() {
		if c.name != channel || channel != "host" {
			continue
		}
		for _, typ := range append(c.sends, c.receives...) {
			if !seen[typ] {
				t.Errorf("%s quotes no %s frame", repoPath(path), typ)
			}
		}
	}
}

// TestGuideListsEveryCodeAndReason checks that the guide's tables cover every error code,
// defer-ack reason, cancel reason and delivery failure reason of package frames.
func TestGuideListsEveryCodeAndReason(t *testing.T) {
	text, _ := guideFrames(t)
	for _, set := range []struct {
		what   string
		values []any
		format string
	}{
		{"error code", frames.Code("").Enum(), "| `%s` |"},
		{"defer-ack reason", frames.DeferAckReason("").Enum(), `reason: "%s"`},
		{"cancel reason", frames.CancelReason("").Enum(), "| `%s` |"},
		{"delivery failure reason", frames.DeliveryFailureReason("").Enum(), "`%s`"},
		{"cancel result", frames.CancelResult("").Enum(), "`%s`"},
		{"interaction update result", frames.InteractionUpdateResult("").Enum(), "`%s`"},
		{"narration state", frames.NarrationState("").Enum(), "%s"},
	} {
		for _, v := range set.values {
			if want := fmt.Sprintf(set.format, v); !strings.Contains(text, want) {
				t.Errorf("%s does not document the %s %v (looked for %q)", repoPath(guidePath), set.what, v, want)
			}
		}
	}
}
