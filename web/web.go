// Package web serves the try-it page of the broker: one plain HTML page, its script and style,
// and the browser SDK bundle (static/sdk.js, built from sdk/js and checked in), embedded in the
// binary.
//
// The page is the caller and a host at once: it joins a session over WebRTC (with the
// microphone) or WebSocket, declares a demo deferred tool, book_table, and runs its calls
// itself — defer, progress, a milestone, a decision for the caller — while it shows the
// session live: jobs, narration, decisions, transcripts, the timeline and every frame.
//
// Mount Handler at "/" next to the broker's routes (it answers the paths it has files for and
// 404 for the rest):
//
//	handler := node.Handler(wsh, func(mux *http.ServeMux) {
//		mux.Handle("/", web.Handler())
//		rtc.Register(mux)
//	})
//
// POST /v1/sessions answers caller_url = BASE/?session=ID&token=JOIN_TOKEN, which opens this
// page ready to join that session.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// static holds the page: index.html, app.js, style.css and sdk.js (the SDK bundle).
//
//go:embed static
var static embed.FS

// contentTypes are the types of the page's files (not left to the platform's MIME tables).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
	".svg":  "image/svg+xml",
}

// contentSecurityPolicy allows the page's own files and the broker's API on the same origin;
// blob: scripts are the SDK's audio worklet (WebSocket microphone), mediastream: the agent's audio.
const contentSecurityPolicy = "default-src 'self'; script-src 'self' blob:; style-src 'self'; " +
	"img-src 'self' data:; media-src 'self' blob: mediastream:; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Handler returns the http.Handler of the page and its assets, for "/": GET and HEAD of
// /, /index.html, /app.js, /style.css and /sdk.js; 404 for any other path, 405 for other methods.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic("web: " + err.Error()) // the embedded tree always has static/
	}
	return &handler{files: files}
}

type handler struct {
	files fs.FS
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	data, err := fs.ReadFile(h.files, name)
	ct, known := contentTypes[path.Ext(name)]
	if err != nil || !known {
		http.NotFound(w, r)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", ct)
	// The page is small and changes with the binary: always revalidate.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Content-Type-Options", "nosniff")
	// The page's URL carries the join token: never send it on as a referrer.
	hdr.Set("Referrer-Policy", "no-referrer")
	if name == "index.html" {
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		hdr.Set("Permissions-Policy", "microphone=(self)")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}
