package wiretest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// HTTPDo sends one HTTP request over a connection of its own (no keep-alives, a 10 s timeout)
// and returns the status, headers and body. key, when set, goes as Authorization: Bearer key,
// contentType, when set, as Content-Type; an empty body sends none. A request that fails fails
// the test.
func HTTPDo(t testing.TB, method, url, key, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, data
}
