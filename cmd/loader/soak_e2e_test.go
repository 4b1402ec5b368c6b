package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loaderproject/loader/internal/fixture"
	"github.com/loaderproject/loader/internal/sinkapi"
	"github.com/loaderproject/loader/internal/tcpproxy"
)

// soakFigures are what a soak did.
type soakFigures struct {
	rounds, loaderKills, sinkKills, cuts, ackDelays, resumes int
	retries, rows, dups, missing, reported                   int64
	peakRSS                                                  int64
}

// TestSoak loads files into the embedded sink through a TCP proxy while random faults strike: the
// loader or the sink killed with SIGKILL, every connection cut, acks held back. Each time the load
// is resumed, until it completes; then every source id must be in the table exactly once and the
// loader's peak RSS within its budget. It runs rounds (a new table each) for LOADER_SOAK (default
// 20s; make soak runs 10m) and prints the figures.
func TestSoak(t *testing.T) {
	budget := 20 * time.Second
	if v := os.Getenv("LOADER_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LOADER_SOAK=%q: %v", v, err)
		}
		budget = d
	}
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	files, perFile := 4, int64(3000)
	if budget >= time.Minute {
		files, perFile = 20, 20000
	}
	total := int64(files) * perFile
	wh := t.TempDir()
	srv := serve(t, wh, "--test-faults")
	proxy, err := tcpproxy.New(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	data := writeParquetParts(t, files, perFile)
	manifests := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	const inflight = 16 << 20
	var fig soakFigures
	deadline := time.Now().Add(budget)
	for round := 0; fig.rounds == 0 || time.Now().Before(deadline); round++ {
		table := fmt.Sprintf("main.default.soak_%d", round)
		mustLoader(t, "table", "create", table, "--warehouse", wh, "--columns", fixture.TableColumns)
		args := []string{"load", "--table", table, "--endpoint", "grpc://" + proxy.Addr(), "--json", "--streams", "3",
			"--max-frame-bytes", "64KiB", "--max-inflight-bytes", fmt.Sprint(inflight), "--manifest-dir", manifests,
			"--retries", "50", "--retry-backoff", "50ms", "--ack-timeout", "2s", data}
		for {
			l := startLoad(t, args...)
			fault := rng.IntN(5)
			if fault < 4 {
				// Strike once the load is under way, at a random point.
				waitRowsOf(t, srv.addr, table, 1+rng.Int64N(total/2), l)
			}
			switch fault {
			case 0:
				l.kill9(t)
				fig.loaderKills++
				fig.resumes++
				continue
			case 1:
				addr := srv.addr
				_ = srv.cmd.Process.Kill()
				<-srv.done
				srv = serve(t, wh, "--test-faults", "--listen", addr)
				fig.sinkKills++
			case 2:
				proxy.Cut()
				fig.cuts++
			case 3:
				setFaults(t, srv.addr, `{"ack_delay":"300ms"}`)
				fig.ackDelays++
			}
			sum := l.wait(t)
			setFaults(t, srv.addr, `{}`)
			fig.retries += sum.Retries
			fig.reported += sum.PossiblyDuplicatedRows
			if ru, ok := l.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				fig.peakRSS = max(fig.peakRSS, ru.Maxrss*1024)
			}
			break
		}
		ids := tableIDsOf(t, srv.addr, table)
		dups, missing := dupsAndMissing(ids, total)
		fig.dups += dups
		fig.missing += missing
		fig.rows += total
		fig.rounds++
	}
	t.Logf("soak: %d rounds of %d rows in %s: faults injected %d (loader kills %d, sink kills %d, connection cuts %d, ack delays %d); retries %d, resumes %d; rows %d, duplicates %d, missing %d, reported possibly duplicated %d; peak RSS %d MiB",
		fig.rounds, total, budget, fig.loaderKills+fig.sinkKills+fig.cuts+fig.ackDelays, fig.loaderKills, fig.sinkKills, fig.cuts, fig.ackDelays,
		fig.retries, fig.resumes, fig.rows, fig.dups, fig.missing, fig.reported, fig.peakRSS>>20)
	if fig.dups != 0 || fig.missing != 0 || fig.reported != 0 {
		t.Errorf("%d duplicate and %d missing rows, %d reported possibly duplicated; want 0, 0, 0", fig.dups, fig.missing, fig.reported)
	}
	// The in-flight budget plus the decoders' batches, the encoder's scratch and the Go runtime.
	if limit := int64(inflight + 512<<20); fig.peakRSS > limit {
		t.Errorf("peak RSS %d MiB; want at most %d MiB", fig.peakRSS>>20, limit>>20)
	}
}

// setFaults installs a fault set in the sink at addr (started with --test-faults).
func setFaults(t *testing.T, addr, faults string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := flight.NewFlightServiceClient(conn).DoAction(ctx, &flight.Action{Type: sinkapi.ActionFaults, Body: []byte(faults)})
	if err == nil {
		_, err = st.Recv()
	}
	if err != nil {
		t.Fatalf("set faults %s: %v", faults, err)
	}
}

// waitRowsOf is waitRows for any table.
func waitRowsOf(t *testing.T, addr, table string, n int64, l *bgLoad) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		r := loader(t, "table", "count", table, "--endpoint", "grpc://"+addr)
		if r.code == 0 && lastLineInt(t, r.stdout) >= n {
			return
		}
		select {
		case err := <-l.done:
			l.done <- err
			return // it ended before the fault: the fault strikes a finished load, harmlessly
		default:
		}
	}
	t.Fatalf("table %s did not reach %d rows within 2 minutes", table, n)
}

// tableIDsOf reads a table back through the sink (DoGet) and counts each id.
func tableIDsOf(t *testing.T, addr, table string) map[int64]int {
	t.Helper()
	ids := map[int64]int{}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Commit what is acknowledged, then read the committed rows.
	if st, err := flight.NewFlightServiceClient(conn).DoAction(ctx, &flight.Action{Type: sinkapi.ActionFlush, Body: []byte(table)}); err == nil {
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
	}
	st, err := flight.NewFlightServiceClient(conn).DoGet(ctx, &flight.Ticket{Ticket: []byte(table)})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := flight.NewRecordReader(st)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	idx := rd.Schema().FieldIndices("id")
	if len(idx) != 1 {
		t.Fatalf("table %s has no id column", table)
	}
	for rd.Next() {
		rec := rd.RecordBatch()
		col, ok := rec.Column(idx[0]).(*array.Int64)
		if !ok {
			t.Fatalf("id column is %s", rec.Column(idx[0]).DataType())
		}
		for i := range col.Len() {
			ids[col.Value(i)]++
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
