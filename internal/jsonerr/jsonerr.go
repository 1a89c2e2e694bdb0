// Package jsonerr words the errors of encoding/json, met decoding a request
// body, for the client that sent it: the field at fault and the JSON it
// should have held, or where the body stopped being JSON, never Go's types.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Describe returns a message for the client about err, which decoding a
// request body returned, and the body field it names ("" when none).
func Describe(err error) (msg, field string) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var me *http.MaxBytesError
	switch {
	case errors.As(err, &te) && te.Field == "" && te.Type != nil:
		return fmt.Sprintf("the body must be %s, not a JSON %s", kind(te.Type), clip(te.Value)), ""
	case errors.As(err, &te) && te.Type != nil:
		f := clip(te.Field)
		return fmt.Sprintf("%s must be %s, not a JSON %s", f, kind(te.Type), clip(te.Value)), f
	case errors.As(err, &se):
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", se.Offset), ""
	case errors.As(err, &me):
		return fmt.Sprintf("the body is larger than %d bytes", me.Limit), ""
	case errors.Is(err, io.EOF):
		return "the body is empty", ""
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is not valid JSON (it ends early)", ""
	}
	// Decoder.DisallowUnknownFields: `json: unknown field "x"`
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f, uerr := strconv.Unquote(name)
		if uerr != nil {
			f = strings.Trim(name, `"`)
		}
		return "unknown field " + strconv.Quote(clip(f)), clip(f)
	}
	return "the body does not fit this route", ""
}

// clip cuts what the client sent, echoed in a message, to 64 bytes.
func clip(s string) string { return Clip(s, 64) }

// Clip cuts s, a value a client sent that an error message echoes, to at
// most n bytes on a rune boundary, marking the cut with "...".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// kind says in words what JSON value a Go type takes.
func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return kind(t.Elem())
	}
	return "an object"
}
