// Command shipnotify sends shipment reminders due days, weeks or months
// ahead: Temporal holds the timers, PostgreSQL holds the mirror.
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], env{lookup: os.LookupEnv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	os.Exit(exitCode(err, os.Stderr))
}

// env is what a command may touch of the process: the environment and the
// standard streams. Tests pass their own.
type env struct {
	lookup func(string) (string, bool)
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

type command struct {
	summary string
	run     func(ctx context.Context, e env, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(context.Context, env, []string) error) {
	commands[name] = command{summary: summary, run: run}
}

// usageError is a mistake in how the command was called or in its input:
// exit status 2, and nothing was written anywhere.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(e.stdout)
		if len(args) == 0 {
			return usagef("no command given")
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usagef("unknown command %q; run shipnotify --help", args[0])
	}
	return cmd.run(ctx, e, args[1:])
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "shipnotify: durable shipment reminders on Temporal, mirrored in PostgreSQL.")
	fmt.Fprintln(w, "\nUsage: shipnotify <command> [flags]   (shipnotify <command> --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nConfiguration comes from the environment; see docs/configuration.md.")
}

// newFlags returns a flag set that reports errors instead of exiting, and
// prints its usage to stdout for --help.
func newFlags(e env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: shipnotify %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; --help prints usage to stdout and ends the
// command successfully (errHelp), a bad flag is a usage error.
func parseFlags(fs *flag.FlagSet, e env, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(e.stdout)
		fs.Usage()
		return errHelp
	}
	if err != nil {
		return usageError{err}
	}
	return nil
}

var errHelp = errors.New("help shown")

func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "shipnotify: "+oneLine(err.Error()))
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	default:
		fmt.Fprintln(stderr, "shipnotify: "+oneLine(err.Error()))
		return 1
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
