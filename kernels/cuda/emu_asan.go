//go:build cgo && !cuda && asan

package cuda

// go test -asan instruments the C compiles but not cgo's C++ ones: the
// kernels are C++, so they get the flag here.

// #cgo CXXFLAGS: -fsanitize=address -fno-omit-frame-pointer
import "C"
