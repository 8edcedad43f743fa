package main

import "net/http"

// routes adds the routes served next to the API: the AsyncAPI document and pages.
func routes(mux *http.ServeMux) {}
