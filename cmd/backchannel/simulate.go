package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
)

// simulateRealtime runs `backchannel simulate-realtime`: the in-repo simulator of the OpenAI
// Realtime server, standalone, serving /v1/realtime — so `serve --model openai` can be tried
// without a key: `backchannel serve --model openai --openai-url ws://HOST:PORT/v1/realtime`.
func simulateRealtime(args []string) error {
	fs := flag.NewFlagSet("simulate-realtime", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	key := fs.String("key", "", "bearer key connections must present (empty: any)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	s, err := sim.Listen(*addr, sim.Options{APIKey: *key, Unrecorded: true})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("realtime simulator listening on %s\n", s.URL())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
