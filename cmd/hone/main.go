// Command hone is the single hone binary: serve, engine, train, demo, export,
// traces, model and version are its subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. Files of this package register theirs in init.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

// stdout and stderr are where usage and errors go (tests replace them).
var stdout, stderr io.Writer = os.Stdout, os.Stderr

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs one command line and returns the exit status: 0 (also for
// --help), 1 when the command failed, 2 for a usage error. A failure is
// printed once, as "hone CMD: error".
func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	if isHelp(name) || name == "help" {
		if name == "help" && len(args) > 1 { // hone help CMD [SUB] = hone CMD [SUB] --help
			return run(ctx, append(args[1:len(args):len(args)], "--help"))
		}
		usage(stdout)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "hone: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:])
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "hone %s: %v\n", name, err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: hone <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n'hone <command> --help' describes a command and its flags.")
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// usageError is a command line hone cannot run (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// flags is the flag set of one command: -h/--help prints its usage on
// stdout, and a bad flag or argument is returned, not printed, so main
// prints it once.
type flags struct {
	*flag.FlagSet
	synopsis string // after "usage: hone "; more lines for subcommands
	about    string // what the command does
	maxArgs  int    // positional arguments allowed after the flags
}

func newFlags(name, synopsis, about string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, synopsis: synopsis, about: about}
}

// parse parses args; after --help it returns flag.ErrHelp.
func (f *flags) parse(args []string) error {
	err := f.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.printUsage(stdout)
		return flag.ErrHelp
	case err != nil:
		return usagef("%v (hone %s --help lists the flags)", err, f.Name())
	case f.NArg() > f.maxArgs:
		return usagef("unexpected argument %q (usage: hone %s)", f.Arg(f.maxArgs), strings.Split(f.synopsis, "\n")[0])
	}
	return nil
}

func (f *flags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: hone %s\n", f.synopsis)
	if f.about != "" {
		fmt.Fprintf(w, "\n%s\n", f.about)
	}
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

// subcommandHelp handles a command made of subcommands (hone traces ls):
// with no argument it is a usage error, with -h/--help/help it prints
// the usage and returns flag.ErrHelp; otherwise it returns nil.
func subcommandHelp(args []string, synopsis, about string) error {
	f := newFlags("", synopsis, about)
	switch {
	case len(args) == 0:
		return usagef("missing subcommand (usage: hone %s)", strings.Split(synopsis, "\n")[0])
	case isHelp(args[0]) || args[0] == "help":
		f.printUsage(stdout)
		return flag.ErrHelp
	}
	return nil
}
