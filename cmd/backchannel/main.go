// Command backchannel is the one binary of Backchannel: `serve` runs the broker, `demo` shows a
// whole voice story, `call` is a one-shot text agent, `bench` measures the broker,
// `verify-permission` judges permission replies with the default verifier and
// `simulate-realtime` stands in for the OpenAI Realtime API.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "demo":
		err = demo(os.Args[2:])
	case "verify-permission":
		err = verifyPermission(os.Args[2:])
	case "bench":
		err = bench(os.Args[2:])
	case "call":
		err = call(os.Args[2:])
	case "simulate-realtime":
		err = simulateRealtime(os.Args[2:])
	case "help", "-h", "--help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "backchannel: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "backchannel %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() { fmt.Fprint(os.Stderr, usageText) }

// usageText lists every command, one a line after "commands:" (the README's table lists them too:
// TestReadmeListsEveryCommand).
const usageText = `usage: backchannel COMMAND [flags]

commands:
  serve               run the broker (backchannel serve -h for its flags)
  demo                watch a whole voice story: a scripted caller, a built-in host, the timeline
  verify-permission   read {"action","arguments","ask","reply"} JSON lines on stdin, write verdicts
  call                call a tool of a session as a text agent, and wait for its result
  simulate-realtime   run the OpenAI Realtime simulator standalone (for serve --model openai)
  bench               measure the broker (bench voice: WebRTC callers per node; --peer-json: the lifecycle benchmark as one JSON line, for a peer harness)
`
