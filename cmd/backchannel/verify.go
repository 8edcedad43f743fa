package main

import "errors"

// verifyPermission runs `backchannel verify-permission` (SPEC 12).
func verifyPermission(args []string) error {
	return errors.New("not available yet")
}
