package main

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/loaderproject/loader/embedded"
	"github.com/loaderproject/loader/flightclient"
	"github.com/loaderproject/loader/load"
	"github.com/loaderproject/loader/objstore"
	"github.com/loaderproject/loader/readers"
	"github.com/loaderproject/loader/schemamatch"
	"github.com/loaderproject/loader/tableschema"
)

// endpointFlags name the table and the endpoint it is behind; load, plan and bench share them.
type endpointFlags struct {
	table    string
	endpoint string
	protocol string
	token    string
	profile  string
	caCert   string

	remote *remote // set by apply for a remote endpoint
}

func (f *endpointFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.table, "table", "", "target table, catalog.schema.table (required)")
	fl.StringVar(&f.endpoint, "endpoint", "", "target URL; empty runs the embedded sink over --warehouse")
	fl.StringVar(&f.protocol, "protocol", string(load.DefaultProtocol), "target dialect: zerobus, flightsql or flight")
	fl.StringVar(&f.token, "token", os.Getenv("LOADER_TOKEN"), "bearer token sent to the endpoint (default $LOADER_TOKEN); Zerobus targets otherwise mint OAuth tokens from $DATABRICKS_CLIENT_ID/$DATABRICKS_CLIENT_SECRET or --profile")
	fl.StringVar(&f.profile, "profile", "", "Databricks CLI profile in ~/.databrickscfg holding host, client_id and client_secret (default $DATABRICKS_CONFIG_PROFILE)")
	fl.StringVar(&f.caCert, "ca-cert", "", "PEM file of a CA to trust, in addition to the system's, for the endpoint and the workspace")
}

// apply sets the table, endpoint, protocol, token and user agent of cfg.
func (f *endpointFlags) apply(cfg *load.Config) error {
	if f.table == "" {
		return usagef("--table is required")
	}
	name, err := tableschema.ParseTableName(f.table)
	if err != nil {
		return usageError{err}
	}
	dialect, err := flightclient.ParseDialect(strings.ToLower(f.protocol))
	if err != nil {
		return usageError{err}
	}
	cfg.Table, cfg.Endpoint, cfg.Protocol, cfg.Token, cfg.UserAgent = name, f.endpoint, dialect, f.token, userAgent()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if f.remote, err = resolveRemote(f, dialect, logger); err != nil {
		return err
	}
	if f.remote != nil {
		cfg.Endpoint, cfg.ClientOptions = f.remote.endpoint, f.remote.opts
	}
	return nil
}

// targetFlags choose the table and how to reach it, the embedded sink included; load and plan share
// them.
type targetFlags struct {
	endpointFlags
	warehouse   string
	createTable bool
	tableSchema string

	embedded []embedded.Option // set by the command before apply: options of the embedded sink
}

func (f *targetFlags) register(fl *pflag.FlagSet) {
	f.endpointFlags.register(fl)
	fl.StringVar(&f.warehouse, "warehouse", embedded.DefaultWarehouse, "warehouse directory of the embedded sink")
	fl.BoolVar(&f.createTable, "create-table", false, "create the table if it does not exist, with --table-schema's columns or the first file's canonical schema (embedded sink and Flight SQL targets)")
	fl.StringVar(&f.tableSchema, "table-schema", "", "the table's columns in Databricks SQL: override what the target describes (a warning says when they differ), and what is assumed for targets that cannot describe tables (Zerobus; default there: the first file's canonical schema)")
}

func (f *targetFlags) apply(cfg *load.Config) error {
	if err := f.endpointFlags.apply(cfg); err != nil {
		return err
	}
	cfg.CreateTable = f.createTable
	if cfg.Endpoint == "" {
		opts := append([]embedded.Option{embedded.WithProtocol(cfg.Protocol), embedded.WithLogger(cfg.Logger)}, f.embedded...)
		cfg.Target = embedded.New(f.warehouse, opts...)
	}
	if f.tableSchema != "" {
		var err error
		if cfg.TableSchema, err = tableschema.ParseColumns(f.tableSchema); err != nil {
			return usagef("--table-schema: %w", err)
		}
	}
	return nil
}

// inputFlags say how to find and read the sources and how to match them to the table.
type inputFlags struct {
	include, exclude []string
	format           string

	delimiter, quote, escape, comment string
	noQuote, noHeader                 bool
	columns                           string
	nullValues                        []string
	stringNulls                       bool
	timestampFormat, dateFormat       string
	allowRagged, lazyQuotes           bool

	schemaMode      string
	caseInsensitive bool
	rescueColumn    string
	binaryAsString  bool

	objectAttempts int
	objectStall    time.Duration
}

func (f *inputFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.include, "include", nil, "load only files whose path (relative to its source) matches this glob; repeatable, ** matches directories")
	fl.StringArrayVar(&f.exclude, "exclude", nil, "skip files whose path matches this glob; repeatable")
	fl.StringVar(&f.format, "input-format", "", "read every file found as parquet, csv, arrow-file or arrow-stream whatever its name, for files named without an extension, such as a warehouse's CSV export (default: by extension, else by the file's first bytes)")

	fl.StringVar(&f.delimiter, "csv-delimiter", "", `CSV field delimiter, one character or "tab" (default "," and tab for .tsv)`)
	fl.StringVar(&f.quote, "csv-quote", "", `CSV quote character (default '"')`)
	fl.BoolVar(&f.noQuote, "csv-no-quote", false, "CSV fields are never quoted")
	fl.StringVar(&f.escape, "csv-escape", "", `CSV escape character inside quoted fields, e.g. '\' (default: none, quotes are doubled)`)
	fl.StringVar(&f.comment, "csv-comment", "", "skip CSV lines starting with this character")
	fl.BoolVar(&f.noHeader, "csv-no-header", false, "CSV files have no header row; name the columns with --columns (else _c0, _c1, ...)")
	fl.StringVar(&f.columns, "columns", "", "comma-separated CSV column names, for files without a header (or to replace it)")
	fl.StringArrayVar(&f.nullValues, "null-value", nil, `CSV text read as null; repeatable (default: an empty field). In text columns it applies to unquoted fields; a quoted "" is an empty string`)
	fl.BoolVar(&f.stringNulls, "csv-quoted-nulls", false, "apply --null-value to quoted fields of text columns too")
	fl.StringVar(&f.timestampFormat, "timestamp-format", "", "layout of CSV timestamps: a Go layout (2006-01-02 15:04:05) or strftime (%Y-%m-%d %H:%M:%S); default RFC 3339 and its common variants")
	fl.StringVar(&f.dateFormat, "date-format", "", "layout of CSV dates, Go or strftime (default 2006-01-02)")
	fl.BoolVar(&f.allowRagged, "allow-ragged", false, "pad CSV rows with too few fields with nulls (rows with too many are always bad rows)")
	fl.BoolVar(&f.lazyQuotes, "csv-lazy-quotes", false, "accept stray quotes inside CSV fields as text")

	fl.StringVar(&f.schemaMode, "schema-mode", "by-name", "by-name (match columns by name, apply safe casts) or strict (types must already be the table's)")
	fl.BoolVar(&f.caseInsensitive, "case-insensitive", false, "match column names ignoring ASCII case")
	fl.StringVar(&f.rescueColumn, "rescue-column", "", "a nullable STRING column that receives, as JSON, source columns the table lacks and values that cannot be cast (like Databricks' _rescued_data)")
	fl.BoolVar(&f.binaryAsString, "binary-as-string", false, "load binary columns into STRING columns, checking each value is UTF-8 (old Impala/Hive Parquet)")

	fl.IntVar(&f.objectAttempts, "object-attempts", objstore.DefaultMaxAttempts, "object stores: how many times a request that fails transiently (5xx, throttling, a reset) is tried, and how many times in a row a download that broke off is fetched on from where it stopped (any store)")
	fl.DurationVar(&f.objectStall, "object-stall-timeout", objstore.DefaultStallTimeout, "object stores: how long a request may wait for its response or its next bytes before its connection is given up: reads, stats and listings are then tried again, a write (plus a second per MiB) fails")
}

// objectOptions are the object-store settings of the flags.
func (f *inputFlags) objectOptions() []objstore.Option {
	return []objstore.Option{objstore.WithMaxAttempts(f.objectAttempts), objstore.WithStallTimeout(f.objectStall)}
}

func (f *inputFlags) apply(cfg *load.Config) error {
	if f.objectAttempts < 1 {
		return usagef("--object-attempts %d: want at least 1", f.objectAttempts)
	}
	if f.objectStall <= 0 {
		return usagef("--object-stall-timeout %v: want a positive duration", f.objectStall)
	}
	cfg.Include, cfg.Exclude = f.include, f.exclude
	var err error
	if f.format != "" {
		if cfg.Format, err = readers.ParseFormat(f.format); err != nil {
			return usagef("--input-format: %w", err)
		}
	}
	opt := readers.CSVOptions{
		NoQuote: f.noQuote, NoHeader: f.noHeader, NullValues: f.nullValues, StringNulls: f.stringNulls,
		AllowRagged: f.allowRagged, LazyQuotes: f.lazyQuotes,
	}
	for _, c := range []struct {
		name string
		val  string
		dst  *rune
	}{{"--csv-delimiter", f.delimiter, &opt.Delimiter}, {"--csv-quote", f.quote, &opt.Quote},
		{"--csv-escape", f.escape, &opt.Escape}, {"--csv-comment", f.comment, &opt.Comment}} {
		if *c.dst, err = oneChar(c.name, c.val); err != nil {
			return err
		}
	}
	if f.columns != "" {
		for _, c := range strings.Split(f.columns, ",") {
			opt.Columns = append(opt.Columns, strings.TrimSpace(c))
		}
	}
	opt.TimestampFormat, opt.DateFormat = goLayout(f.timestampFormat), goLayout(f.dateFormat)
	cfg.CSV = opt // load checks the dialect (an invalid one is ErrConfig: exit 2)
	if cfg.SchemaMode, err = schemamatch.ParseMode(f.schemaMode); err != nil {
		return usageError{err}
	}
	cfg.CaseInsensitive, cfg.RescueColumn, cfg.BinaryAsString = f.caseInsensitive, f.rescueColumn, f.binaryAsString
	return nil
}

// oneChar reads a single-character flag; "tab" and `\t` mean a tab.
func oneChar(name, v string) (rune, error) {
	switch v {
	case "":
		return 0, nil
	case "tab", `\t`:
		return '\t', nil
	}
	r := []rune(v)
	if len(r) != 1 || r[0] > 127 {
		return 0, usagef("%s %q: want one ASCII character", name, v)
	}
	return r[0], nil
}

// strftime maps the strftime directives users write to Go layout elements.
var strftime = strings.NewReplacer(
	"%Y", "2006", "%y", "06", "%m", "01", "%d", "02", "%e", "_2", "%H", "15", "%I", "03", "%p", "PM",
	"%M", "04", "%S", "05", "%f", "000000", "%z", "-0700", "%Z", "MST", "%b", "Jan", "%B", "January",
	"%a", "Mon", "%A", "Monday", "%j", "002", "%%", "%", "%T", "15:04:05", "%F", "2006-01-02",
)

// goLayout accepts a Go layout as is and converts a strftime format.
func goLayout(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	return strftime.Replace(v)
}

// badDataFlags decide what happens to bad files and rows.
type badDataFlags struct {
	onError       string
	quarantineDir string
	stallTimeout  time.Duration
	// What a stream does when the target fails or goes silent.
	ackTimeout   time.Duration
	retries      int
	retryBackoff time.Duration
}

func (f *badDataFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.onError, "on-error", string(load.OnErrorFail), "bad data policy: fail (stop at the first bad file), skip-file (load the rest, exit 3) or quarantine (bad CSV rows and failed files go to --quarantine-dir as NDJSON)")
	fl.StringVar(&f.quarantineDir, "quarantine-dir", load.DefaultQuarantineDir, "dead-letter folder of --on-error quarantine (a subfolder per run)")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", load.DefaultStallTimeout, "fail a file whose decoder makes no progress for this long")
	fl.DurationVar(&f.ackTimeout, "ack-timeout", flightclient.DefaultAckTimeout, "reconnect a stream and send its unacknowledged rows again when no acknowledgement comes for this long")
	fl.IntVar(&f.retries, "retries", flightclient.DefaultRetries, "consecutive transient failures (Unavailable, cut connections, ack timeouts) a stream survives before the load fails")
	fl.DurationVar(&f.retryBackoff, "retry-backoff", flightclient.DefaultBackoffBase, "first wait before a retry, doubled each attempt up to 30s, with jitter")
}

func (f *badDataFlags) apply(cfg *load.Config) error {
	switch load.OnError(f.onError) {
	case load.OnErrorFail, load.OnErrorSkipFile, load.OnErrorQuarantine:
	default:
		return usagef("--on-error %q: want fail, skip-file or quarantine", f.onError)
	}
	cfg.OnError, cfg.QuarantineDir, cfg.StallTimeout = load.OnError(f.onError), f.quarantineDir, f.stallTimeout
	if f.ackTimeout <= 0 || f.retryBackoff <= 0 || f.retries < 0 {
		return usagef("--ack-timeout and --retry-backoff must be positive, --retries at least 0")
	}
	cfg.AckTimeout, cfg.RetryBackoff = f.ackTimeout, f.retryBackoff
	cfg.Retries = f.retries
	if f.retries == 0 {
		cfg.Retries = -1 // none
	}
	return nil
}

// userAgent is the gRPC user agent: loader/<version>.
func userAgent() string { return "loader/" + version }
