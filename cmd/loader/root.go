package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loaderproject/loader/load"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses, documented in `loader --help`.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitPartial     = 3
	exitInterrupted = 130
)

const exitHelp = `Exit status:
  0    success
  1    failure
  2    usage error (bad flags or arguments)
  3    partial load: some files failed and were skipped, the others loaded
  130  interrupted (SIGINT or SIGTERM); acknowledged rows are recorded, a re-run resumes`

// usageError marks an error in how loader was called (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitCode maps an error to the documented exit status. It is the only place that decides one.
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(err, load.ErrPartial):
		return exitPartial
	case errors.Is(err, load.ErrConfig):
		return exitUsage
	}
	return exitFailed
}

// app carries what every command needs.
type app struct {
	stdout, stderr io.Writer
	logLevel       string
	logger         *slog.Logger
	cpuProfile     string
}

// run executes the command line args. It never exits the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := &app{stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	started := false
	// Errors before a command's RunE starts come from parsing flags and arguments: usage errors.
	markStarted(root, &started)
	err := root.ExecuteContext(ctx)
	if err != nil && !started {
		return usageError{err}
	}
	return err
}

func markStarted(c *cobra.Command, started *bool) {
	if c.RunE != nil {
		inner := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			return inner(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markStarted(sub, started)
	}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "loader",
		Short: "Load Parquet, CSV and Arrow IPC files into tables over Arrow Flight",
		Long: `loader loads Parquet, CSV and Arrow IPC files (files, directories or globs) into a table over
Arrow Flight: Databricks Zerobus Ingest, any Flight SQL database with bulk ingest, a plain Flight DoPut
server, or the embedded sink, a local Flight server that writes Delta tables and is the default target.
Loads run over parallel streams, track durable acknowledgements, and resume where they stopped.

` + exitHelp,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
				return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
			}
			a.logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
			if a.cpuProfile != "" {
				f, err := os.Create(a.cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
			}
			return nil
		},
		PersistentPostRun: func(*cobra.Command, []string) {
			if a.cpuProfile != "" {
				pprof.StopCPUProfile()
			}
		},
	}
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "log verbosity on stderr: debug, info, warn or error")
	root.PersistentFlags().StringVar(&a.cpuProfile, "cpu-profile", "", "write a CPU profile of the command to this file")
	_ = root.PersistentFlags().MarkHidden("cpu-profile")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.SetVersionTemplate("loader {{.Version}}\n")
	root.AddCommand(a.serveCommand(), a.tableCommand(), a.loadCommand(), a.planCommand(), a.benchCommand(), a.generateCommand(), a.statusCommand(), a.versionCommand())
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
		if !strings.Contains(c.Long, "Exit status") {
			c.Long = strings.TrimSpace(c.Long + "\n\n" + exitHelp)
		}
	}
	return root
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(a.stdout, "loader", version)
			return err
		},
	}
}
