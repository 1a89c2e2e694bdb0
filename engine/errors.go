package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// apiError is a vLLM-style error: {"error":{"message","type","param","code"}}.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	e := &apiError{Message: fmt.Sprintf(format, args...), Type: "BadRequestError", Code: http.StatusBadRequest}
	if param != "" {
		e.Param = &param
	}
	return e
}

func notFound(param, format string, args ...any) *apiError {
	e := badRequest(param, format, args...)
	e.Type, e.Code = "NotFoundError", http.StatusNotFound
	return e
}

func serverError(err error) *apiError {
	return &apiError{Message: err.Error(), Type: "InternalServerError", Code: http.StatusInternalServerError}
}

func unavailable(msg string) *apiError {
	return &apiError{Message: msg, Type: "ServiceUnavailableError", Code: http.StatusServiceUnavailable}
}

// routingErrors serves m; when m has no route for a request (404) or the
// path takes other methods (405, with Allow) the answer is vLLM's JSON error.
func routingErrors(m *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := m.Handler(r); pattern == "" { // net/http's own 404 or 405
			w = &routingErrorWriter{ResponseWriter: w}
		}
		m.ServeHTTP(w, r)
	})
}

// routingErrorWriter turns the plain-text error ServeMux writes into JSON;
// headers it set (Allow) are kept.
type routingErrorWriter struct {
	http.ResponseWriter
	done bool
}

func (w *routingErrorWriter) WriteHeader(code int) {
	if w.done {
		return
	}
	w.done = true
	h := w.Header()
	h.Del("X-Content-Type-Options")
	phrase := http.StatusText(code)
	writeError(w.ResponseWriter, &apiError{Message: phrase, Type: phrase, Code: code})
}

func (w *routingErrorWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusNotFound)
	}
	return len(b), nil // the plain-text body is replaced
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Code, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
