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
	"strings"
)

// Describe returns a message for the client about err, which decoding a
// request body returned, and the body field it names ("" when none).
func Describe(err error) (msg, field string) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var me *http.MaxBytesError
	switch {
	case errors.As(err, &te) && te.Field != "" && te.Type != nil:
		return fmt.Sprintf("%s must be %s, not a JSON %s", te.Field, kind(te.Type), te.Value), te.Field
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
		f := strings.Trim(name, `"`)
		return "unknown field " + name, f
	}
	return "the body does not fit this route: " + strings.TrimPrefix(err.Error(), "json: "), ""
}

// kind says in words what JSON value a Go type takes.
func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number"
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
