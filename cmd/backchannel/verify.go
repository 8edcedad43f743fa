package main

import (
	"context"
	"flag"
	"os"

	"github.com/backchannel-io/backchannel/permissions"
)

// verifyPermission runs `backchannel verify-permission` (SPEC 12): JSON lines
// {"action","arguments","ask","reply"} on standard input, one {"verdict","reason"} line per input
// line on standard output, judged by the default (rule-based) verifier.
func verifyPermission(args []string) error {
	fs := flag.NewFlagSet("verify-permission", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return permissions.RunVerifyCommand(context.Background(), permissions.NewRules(), os.Stdin, os.Stdout)
}
