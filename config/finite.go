package config

import (
	"fmt"
	"math"
	"reflect"
	"strings"
)

// checkFinite rejects NaN and ±Inf in every float option, naming its key:
// YAML (.nan, .inf) and the environment (NaN, +Inf) both parse them, and a
// comparison such as "sample_rate < 0 || sample_rate > 1" lets NaN through.
func checkFinite(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return checkFinite(v.Elem(), path)
		}
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: %v is not a finite number", path, f)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			p := path
			if name != "" {
				p = strings.TrimPrefix(path+"."+name, ".")
			}
			if err := checkFinite(v.Field(i), p); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := checkFinite(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
