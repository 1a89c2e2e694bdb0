package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	register("version", "print the version", func(ctx context.Context, args []string) error {
		if err := newFlags("version", "version", "Prints hone's version, commit and platform.").parse(args); err != nil {
			return err
		}
		rev := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					rev = s.Value
				}
			}
		}
		fmt.Printf("hone %s %s %s/%s\n", version, rev, runtime.GOOS, runtime.GOARCH)
		return nil
	})
}
