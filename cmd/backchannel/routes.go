package main

import (
	"log/slog"
	"net/http"

	"github.com/backchannel-io/backchannel/asyncapi"
	"github.com/backchannel-io/backchannel/web"
)

// routes adds the routes served next to the API: the AsyncAPI document of every frame
// (SPEC 16) and the try-it page with the browser SDK at / (the caller_url of a session opens
// it ready to join).
func routes(mux *http.ServeMux) {
	mux.Handle("/", web.Handler())
	doc, err := asyncapi.Document()
	mux.HandleFunc("GET /asyncapi.json", func(w http.ResponseWriter, _ *http.Request) {
		if err != nil {
			slog.Error("asyncapi document", "err", err)
			http.Error(w, `{"code":"internal","message":"the AsyncAPI document could not be built"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
}
