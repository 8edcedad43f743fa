package web

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromiumPath is where Debian's chromium package puts the browser the tests drive.
const chromiumPath = "/usr/bin/chromium"

// chromiumInstallHint is what a test prints when the browser cannot be installed.
const chromiumInstallHint = "the browser tests need Debian's Chromium at " + chromiumPath +
	": install it with `sudo apt-get update && sudo apt-get install -y chromium` and run the tests again"

var (
	chromiumOnce sync.Once
	chromiumErr  string
)

// ensureChromium makes sure /usr/bin/chromium exists, installing Debian's chromium package
// (apt-get install -y chromium, with sudo when not root, apt-get update first when the package
// is not known) when it is missing. It fails the test with what went wrong; it never skips.
func ensureChromium(t *testing.T) string {
	t.Helper()
	chromiumOnce.Do(func() { chromiumErr = installChromium(t) })
	if chromiumErr != "" {
		t.Fatal(chromiumErr)
	}
	return chromiumPath
}

// installChromium returns "" when the browser is there (or was installed), else the reason.
func installChromium(t *testing.T) string {
	if _, err := os.Stat(chromiumPath); err == nil {
		return ""
	}
	t.Logf("%s is missing: installing Debian's chromium package (once)", chromiumPath)
	var sudo []string
	if os.Geteuid() != 0 {
		p, err := exec.LookPath("sudo")
		if err != nil {
			return "chromium is not installed and this user is not root and has no sudo; " + chromiumInstallHint
		}
		sudo = []string{p, "-n"}
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		all := append(append([]string{}, sudo...), args...)
		cmd := exec.CommandContext(ctx, all[0], all[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	install := func() (string, error) {
		return run("apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium")
	}
	out, err := install()
	if err != nil && (strings.Contains(out, "Unable to locate package") || strings.Contains(out, "has no installation candidate") ||
		strings.Contains(out, "404") || strings.Contains(out, "Failed to fetch")) {
		t.Logf("apt-get install chromium: the package lists are stale or empty; running apt-get update")
		if uout, uerr := run("apt-get", "update", "-q"); uerr != nil {
			return "apt-get update failed: " + uerr.Error() + "\n" + tail(uout) + "\n" + chromiumInstallHint
		}
		out, err = install()
	}
	if err != nil {
		return "apt-get install -y chromium failed: " + err.Error() + "\n" + tail(out) + "\n" + chromiumInstallHint
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		return "apt-get install -y chromium succeeded but " + chromiumPath + " is still missing; " + chromiumInstallHint
	}
	t.Logf("installed %s", chromiumPath)
	return ""
}

// tail returns the last lines of a command's output, for error messages.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
