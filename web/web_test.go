package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// get serves one request with Handler.
func get(t *testing.T, method, path string) *http.Response {
	t.Helper()
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Result()
}

// TestHandlerServesThePage: the page and its assets, with their types and headers.
func TestHandlerServesThePage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"/?session=s&token=t", "text/html; charset=utf-8", "<title>Backchannel"},
		{"/index.html", "text/html; charset=utf-8", "book_table"},
		{"/app.js", "text/javascript; charset=utf-8", `from "./sdk.js"`},
		{"/sdk.js", "text/javascript; charset=utf-8", "DO NOT EDIT"},
		{"/style.css", "text/css; charset=utf-8", ":root"},
	} {
		resp := get(t, http.MethodGet, tc.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType || !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.contains, strings.Contains(string(body), tc.contains))
		}
		if resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
			resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: headers %v", tc.path, resp.Header)
		}
	}
	if csp := get(t, http.MethodGet, "/").Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("the page's Content-Security-Policy: %q", csp)
	}
	head := get(t, http.MethodHead, "/sdk.js")
	if b, _ := io.ReadAll(head.Body); head.StatusCode != http.StatusOK || len(b) != 0 {
		t.Errorf("HEAD /sdk.js: %d with %d bytes", head.StatusCode, len(b))
	}
}

// TestHandlerRefuses: other paths are 404, other methods 405.
func TestHandlerRefuses(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/favicon.ico", "/static/index.html", "/../web.go", "/web.go", "/v1/nothing", "/x/../../go.mod"} {
		if resp := get(t, http.MethodGet, p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	resp := get(t, http.MethodPost, "/")
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestPageReferencesExist: every local file the page loads is served, and the page uses only
// names the SDK bundle exports.
func TestPageReferencesExist(t *testing.T) {
	t.Parallel()
	html, _ := io.ReadAll(get(t, http.MethodGet, "/").Body)
	for _, m := range regexp.MustCompile(`(?:src|href)="([^":]+)"`).FindAllStringSubmatch(string(html), -1) {
		if resp := get(t, http.MethodGet, "/"+m[1]); resp.StatusCode != http.StatusOK {
			t.Errorf("the page loads %s: %d", m[1], resp.StatusCode)
		}
	}
	app, _ := io.ReadAll(get(t, http.MethodGet, "/app.js").Body)
	bundle, _ := io.ReadAll(get(t, http.MethodGet, "/sdk.js").Body)
	imp := regexp.MustCompile(`import \{([^}]*)\} from "\./sdk\.js"`).FindStringSubmatch(string(app))
	if imp == nil {
		t.Fatal("app.js does not import from ./sdk.js")
	}
	exports := regexp.MustCompile(`(?s)export \{(.*?)\};`).FindStringSubmatch(string(bundle))
	if exports == nil {
		t.Fatal("sdk.js has no export list")
	}
	for _, name := range strings.Split(imp[1], ",") {
		name = strings.TrimSpace(name)
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(exports[1]) {
			t.Errorf("app.js imports %s, which sdk.js does not export", name)
		}
	}
}
