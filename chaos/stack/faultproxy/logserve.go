package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
)

// The request log served to the harness (GET /_chaos/log): one page of whole lines from a byte
// cursor, read with pread below a snapshot of the file's size, so neither side ever holds the whole
// log and a line still being appended is never cut in half.

const (
	logPageDefault  = 1000
	logPageMaxLines = 10000
	logPageMaxBytes = 1 << 20  // line bytes in one page; also the longest line that can be served
	logScanMaxBytes = 16 << 20 // bytes one call may read while it filters by since
)

type logPage struct {
	Name       string   `json:"name"`
	Cursor     int64    `json:"cursor"`
	NextCursor int64    `json:"next_cursor"`
	More       bool     `json:"more"`
	Size       int64    `json:"size"`
	Lines      []string `json:"lines"`
}

// errLogPage is a request the log cannot answer, with its HTTP status.
type errLogPage struct {
	status int
	msg    string
}

func (e *errLogPage) Error() string { return e.msg }

// readLogPage reads whole lines from cursor, below size: at most limit lines and logPageMaxBytes of
// them; with since, only lines whose t_arrival is >= since (or that do not parse: the reader
// judges those). A trailing line with no newline yet is left for the next call.
func readLogPage(r io.ReaderAt, size, cursor int64, limit int, since *float64) (logPage, error) {
	pg := logPage{Cursor: cursor, NextCursor: cursor, Size: size, Lines: []string{}}
	if cursor > size {
		return pg, &errLogPage{416, fmt.Sprintf("cursor %d is past the end of the log (%d bytes): was it truncated?", cursor, size)}
	}
	if cursor > 0 {
		var prev [1]byte
		if _, err := r.ReadAt(prev[:], cursor-1); err != nil {
			return pg, &errLogPage{500, "request log: " + err.Error()}
		}
		if prev[0] != '\n' {
			return pg, &errLogPage{400, fmt.Sprintf("cursor %d is not at the start of a line", cursor)}
		}
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, cursor, size-cursor), logPageMaxBytes+1)
	pos, kept := cursor, 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(pg.Lines) == 0 && pos == cursor {
				return pg, &errLogPage{500, fmt.Sprintf("request log: the line at cursor %d is over %d bytes", pos, logPageMaxBytes)}
			}
			pg.More = true
			break
		}
		if err != nil { // io.EOF: nothing left, or a line not yet finished
			if err != io.EOF {
				return pg, &errLogPage{500, "request log: " + err.Error()}
			}
			break
		}
		body := line[:len(line)-1]
		if len(body) > 0 && (since == nil || arrivedSince(body, *since)) {
			if len(pg.Lines) == limit || kept+len(body) > logPageMaxBytes {
				pg.More = true
				break
			}
			pg.Lines = append(pg.Lines, string(body))
			kept += len(body)
		}
		pos += int64(len(line))
		if pos-cursor >= logScanMaxBytes && pos < size {
			pg.More = true
			break
		}
	}
	pg.NextCursor = pos
	return pg, nil
}

// arrivedSince: the line's t_arrival is >= since, or it has none the proxy can read.
func arrivedSince(line []byte, since float64) bool {
	var rec struct {
		TArrival *float64 `json:"t_arrival"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.TArrival == nil {
		return true
	}
	return *rec.TArrival >= since
}

func (p *proxy) serveLog(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		adminError(w, 405, "method "+r.Method+" not allowed on /_chaos/log (GET)")
		return
	}
	if !p.log.enabled() {
		adminError(w, 404, "no request log: this proxy was started without --request-log")
		return
	}
	cursor, limit, since, err := logQuery(r)
	if err != nil {
		adminError(w, 400, err.Error())
		return
	}
	size, rf, err := p.log.snapshot()
	if err != nil {
		adminError(w, 500, "request log: "+err.Error())
		return
	}
	pg, err := readLogPage(rf, size, cursor, limit, since)
	var bad *errLogPage
	if errors.As(err, &bad) {
		adminError(w, bad.status, bad.msg)
		return
	}
	pg.Name = p.name
	writeJSON(w, 200, pg)
}

// logQuery reads cursor (byte offset, 0), limit (lines, 1000) and since (epoch seconds, none).
func logQuery(r *http.Request) (cursor int64, limit int, since *float64, err error) {
	q := r.URL.Query()
	for k := range q {
		if k != "cursor" && k != "limit" && k != "since" {
			return 0, 0, nil, fmt.Errorf("log: unknown parameter %q (cursor, limit, since)", k)
		}
	}
	limit = logPageDefault
	if s := q.Get("cursor"); s != "" {
		if cursor, err = strconv.ParseInt(s, 10, 64); err != nil || cursor < 0 {
			return 0, 0, nil, fmt.Errorf("log.cursor: expected a byte offset >= 0, got %q", s)
		}
	}
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > logPageMaxLines {
			return 0, 0, nil, fmt.Errorf("log.limit: expected 1-%d lines, got %q", logPageMaxLines, s)
		}
	}
	if s := q.Get("since"); s != "" {
		t, perr := strconv.ParseFloat(s, 64)
		if perr != nil || math.IsNaN(t) || math.IsInf(t, 0) {
			return 0, 0, nil, fmt.Errorf("log.since: expected epoch seconds, got %q", s)
		}
		since = &t
	}
	return cursor, limit, since, nil
}
