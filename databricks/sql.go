package databricks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/loaderproject/loader/tableschema"
)

// Statement states of the SQL Statement Execution API.
const (
	StatePending   = "PENDING"
	StateRunning   = "RUNNING"
	StateSucceeded = "SUCCEEDED"
	StateFailed    = "FAILED"
	StateCanceled  = "CANCELED"
	StateClosed    = "CLOSED"
)

// StatementRequest is the body of POST /api/2.0/sql/statements (the fields used here).
type StatementRequest struct {
	WarehouseID   string `json:"warehouse_id"`
	Statement     string `json:"statement"`
	WaitTimeout   string `json:"wait_timeout,omitempty"`
	OnWaitTimeout string `json:"on_wait_timeout,omitempty"`
	Format        string `json:"format,omitempty"`
	Disposition   string `json:"disposition,omitempty"`
}

// StatementResponse is the answer of the Statement Execution API (the fields used here).
type StatementResponse struct {
	StatementID string          `json:"statement_id"`
	Status      StatementStatus `json:"status"`
	Result      *struct {
		DataArray [][]*string `json:"data_array"`
	} `json:"result,omitempty"`
}

// StatementStatus is a statement's state and, when it failed, why.
type StatementStatus struct {
	State string `json:"state"`
	Error *struct {
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	} `json:"error,omitempty"`
}

// SQLError is a statement the warehouse refused or failed, or an HTTP error of the API.
type SQLError struct {
	StatusCode int    // HTTP status, 0 when the statement itself failed
	Code       string // the API's error_code
	Message    string
}

func (e *SQLError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("SQL Statement Execution API: HTTP %d %s: %s", e.StatusCode, e.Code, e.Message)
	}
	return fmt.Sprintf("SQL statement failed: %s: %s", e.Code, e.Message)
}

// SQLCounter counts a table's rows through the SQL Statement Execution API on a SQL warehouse.
type SQLCounter struct {
	Tokens      *Tokens
	WarehouseID string
	// HTTPClient makes the requests; default http.DefaultClient.
	HTTPClient *http.Client
	// PollInterval is the wait between polls of a running statement; default 500 ms.
	PollInterval time.Duration
}

// Count runs SELECT count(*) FROM table and returns the count.
func (s *SQLCounter) Count(ctx context.Context, table tableschema.TableName) (int64, error) {
	resp, err := s.Execute(ctx, "SELECT count(*) FROM "+table.String())
	if err != nil {
		return 0, err
	}
	if resp.Result == nil || len(resp.Result.DataArray) != 1 || len(resp.Result.DataArray[0]) < 1 || resp.Result.DataArray[0][0] == nil {
		return 0, fmt.Errorf("count %s: the answer has no single count", table)
	}
	n, err := strconv.ParseInt(*resp.Result.DataArray[0][0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", table, err)
	}
	return n, nil
}

// Execute runs a statement and waits until it ends, polling GET /api/2.0/sql/statements/{id}.
func (s *SQLCounter) Execute(ctx context.Context, statement string) (*StatementResponse, error) {
	if s.WarehouseID == "" {
		return nil, errors.New("no SQL warehouse id")
	}
	body, _ := json.Marshal(StatementRequest{WarehouseID: s.WarehouseID, Statement: statement, WaitTimeout: "10s",
		OnWaitTimeout: "CONTINUE", Format: "JSON_ARRAY", Disposition: "INLINE"})
	resp, err := s.do(ctx, http.MethodPost, "/api/2.0/sql/statements", body)
	if err != nil {
		return nil, err
	}
	poll := s.PollInterval
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	for {
		switch resp.Status.State {
		case StateSucceeded:
			return resp, nil
		case StatePending, StateRunning:
		default:
			e := &SQLError{Code: resp.Status.State}
			if resp.Status.Error != nil {
				e.Code, e.Message = resp.Status.Error.ErrorCode, resp.Status.Error.Message
			}
			return nil, e
		}
		t := time.NewTimer(poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		if resp, err = s.do(ctx, http.MethodGet, "/api/2.0/sql/statements/"+resp.StatementID, nil); err != nil {
			return nil, err
		}
	}
}

func (s *SQLCounter) do(ctx context.Context, method, path string, body []byte) (*StatementResponse, error) {
	tok, err := s.Tokens.WorkspaceToken(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, s.Tokens.cfg.Credentials.WorkspaceURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	hc := s.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		var apiErr struct {
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
		}
		_ = json.Unmarshal(data, &apiErr)
		if apiErr.Message == "" {
			apiErr.Message = string(bytes.TrimSpace(data))
		}
		return nil, &SQLError{StatusCode: res.StatusCode, Code: apiErr.ErrorCode, Message: apiErr.Message}
	}
	var out StatementResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("SQL Statement Execution API: %w", err)
	}
	return &out, nil
}
