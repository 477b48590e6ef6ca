// Package cli is what shipnotify's programs share: commands with their
// flags, usage errors and exit codes, the connections a command opens
// (Deps), and the long-lived processes they run (the reminder worker, the
// metrics and health server). The product (cmd/shipnotify) and the
// benchmark (cmd/shipnotify-bench) are each a Program of commands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Env is what a command may touch of the process: the environment and the
// standard streams. Tests pass their own.
type Env struct {
	Lookup func(string) (string, bool)
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Program is the name usage lines give (Program.Run sets it).
	Program string
}

// RunFunc runs a command with its arguments (the command's name left out).
type RunFunc func(ctx context.Context, e Env, args []string) error

type command struct {
	summary string
	run     RunFunc
}

// Program is a binary's commands.
type Program struct {
	// Name is the binary's name; Summary its one line; Footer ends --help.
	Name, Summary, Footer string
	commands              map[string]command
}

// Register adds a command.
func (p *Program) Register(name, summary string, run RunFunc) {
	if p.commands == nil {
		p.commands = map[string]command{}
	}
	p.commands[name] = command{summary: summary, run: run}
}

// Commands is the registered commands' names, sorted.
func (p *Program) Commands() []string {
	names := make([]string, 0, len(p.commands))
	for n := range p.commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Main runs the program on the process's arguments, environment and
// streams until SIGINT or SIGTERM, and exits with its status.
func (p *Program) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := p.Run(ctx, os.Args[1:], Env{Lookup: os.LookupEnv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(p.ExitCode(err, os.Stderr))
}

// Run runs the command args name.
func (p *Program) Run(ctx context.Context, args []string, e Env) error {
	e.Program = p.Name
	if len(args) >= 2 && args[0] == "help" {
		// help CMD is CMD --help.
		if _, ok := p.commands[args[1]]; ok {
			args = []string{args[1], "--help"}
		}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		p.printUsage(e.Stdout)
		if len(args) == 0 {
			return Usagef("no command given")
		}
		return nil
	}
	cmd, ok := p.commands[args[0]]
	if !ok {
		return Usagef("unknown command %q; run %s --help", args[0], p.Name)
	}
	return cmd.run(ctx, e, args[1:])
}

func (p *Program) printUsage(w io.Writer) {
	fmt.Fprintf(w, "%s: %s\n", p.Name, p.Summary)
	fmt.Fprintf(w, "\nUsage: %s <command> [flags]   (%s <command> --help for its flags)\n", p.Name, p.Name)
	fmt.Fprintln(w, "\nCommands:")
	width := 0
	for _, n := range p.Commands() {
		width = max(width, len(n))
	}
	for _, n := range p.Commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, p.commands[n].summary)
	}
	if p.Footer != "" {
		fmt.Fprintln(w, "\n"+p.Footer)
	}
}

// ExitCode is err's exit status, its message written to stderr: 0 for
// none (or --help), 2 for a usage error, 130 for an interrupt, 1 else.
func (p *Program) ExitCode(err error, stderr io.Writer) int {
	var ue UsageError
	missing := schemaMissing(err)
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, p.Name+": "+oneLine(err.Error()))
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	case missing != "":
		fmt.Fprintf(stderr, "%s: the mirror's schema is missing or out of date here: run %s migrate (%s)\n", p.Name, p.Name, missing)
		return 1
	default:
		fmt.Fprintln(stderr, p.Name+": "+oneLine(err.Error()))
		return 1
	}
}

// schemaMissing is PostgreSQL's message when err is a query of a table,
// column or function the database does not have (an unmigrated mirror, or
// one behind this binary), "" otherwise.
func schemaMissing(err error) string {
	var pg *pgconn.PgError
	// undefined_table, undefined_column, undefined_function
	if errors.As(err, &pg) && slices.Contains([]string{"42P01", "42703", "42883"}, pg.Code) {
		return pg.Message
	}
	return ""
}

// UsageError is a mistake in how the command was called or in its input:
// exit status 2, and nothing was written anywhere.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage makes err a usage error.
func Usage(err error) error { return UsageError{Err: err} }

// Usagef is a usage error with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{Err: fmt.Errorf(format, args...)}
}

// NewFlags returns a flag set that reports errors instead of exiting, and
// prints its usage to stdout for --help.
func NewFlags(e Env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s\n", e.Program, usage)
		any := false
		fs.VisitAll(func(*flag.Flag) { any = true })
		if !any {
			fmt.Fprintln(fs.Output(), "\nIt takes no flags.")
			return
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// NewGroupFlags returns the flag set of a command made of subcommands,
// which takes no flags of its own: its --help names where the
// subcommands' flags are, rather than saying there are none.
func NewGroupFlags(e Env, name, usage string, subcommands ...string) *flag.FlagSet {
	fs := NewFlags(e, name, usage)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s\n", e.Program, usage)
		helps := make([]string, len(subcommands))
		for i, s := range subcommands {
			helps[i] = fmt.Sprintf("%s %s %s --help", e.Program, name, s)
		}
		fmt.Fprintf(fs.Output(), "\nEach subcommand takes its own flags: %s.\n", strings.Join(helps, ", "))
	}
	return fs
}

// ParseFlags parses args; --help prints usage to stdout and ends the
// command successfully (ErrHelp), a bad flag is a usage error.
func ParseFlags(fs *flag.FlagSet, e Env, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(e.Stdout)
		fs.Usage()
		return ErrHelp
	}
	if err != nil {
		return Usage(err)
	}
	return nil
}

// Count is n and the noun that goes with it: "1 reminder", "2 reminders".
func Count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// ErrHelp is a command's answer to --help: its usage was shown.
var ErrHelp = errors.New("help shown")

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// RunCaptured runs args in process with exactly env as the environment
// and stdin as the input, as the binary would, and returns its exit status
// and what it wrote.
func (p *Program) RunCaptured(ctx context.Context, env map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut strings.Builder
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	err := p.Run(ctx, args, Env{Lookup: lookup, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut})
	code = p.ExitCode(err, &errOut)
	return code, out.String(), errOut.String()
}
