package main

import (
	"os"
	"strconv"
	"sync"
	"time"
)

// requestLog appends one JSON line per proxied POST, each with a single write(2) on an
// O_APPEND file: a killed proxy leaves whole lines, and a line is in the kernel before the
// client sees the answer end.
type requestLog struct {
	on  bool // fixed at open; f goes nil at close
	mu  sync.Mutex
	f   *os.File
	rf  *os.File // its own read-only handle, for GET /_chaos/log (pread: no shared offset)
	buf []byte
}

func openRequestLog(path string) (*requestLog, error) {
	if path == "" {
		return &requestLog{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	rf, err := os.Open(path)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &requestLog{on: true, f: f, rf: rf}, nil
}

// snapshot is the log's size now and the handle to read below it.
func (l *requestLog) snapshot() (int64, *os.File, error) {
	st, err := l.rf.Stat()
	if err != nil {
		return 0, nil, err
	}
	return st.Size(), l.rf, nil
}

func (l *requestLog) enabled() bool { return l != nil && l.on }

func (l *requestLog) write(rec *logRecord) {
	if !l.enabled() {
		return
	}
	l.mu.Lock()
	if l.f != nil {
		l.buf = rec.appendJSON(l.buf[:0])
		_, _ = l.f.Write(l.buf)
	}
	l.mu.Unlock()
}

func (l *requestLog) close() {
	if l.enabled() {
		l.mu.Lock()
		if l.f != nil {
			_ = l.f.Close()
			_ = l.rf.Close()
			l.f = nil
		}
		l.mu.Unlock()
	}
}

// logRecord is one request's line; zero times and statuses are written as null.
type logRecord struct {
	requestID      string
	tArrival       time.Time
	tHeaders       time.Time
	tFirstToken    time.Time
	tFinish        time.Time
	status         int
	outcome        string
	outputTokens   int
	model          string
	hasModel       bool
	stream         bool
	resumed        bool
	path           string
	upstreamStatus int
	replicaName    string
	pl             *plan // nil when no rule was set
	logged         bool
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, epoch(t), 'f', 6, 64)
}

func (rec *logRecord) appendJSON(b []byte) []byte {
	b = append(b, `{"request_id":`...)
	b = appendJSONString(b, rec.requestID)
	b = append(b, `,"t_arrival":`...)
	b = appendTime(b, rec.tArrival)
	b = append(b, `,"t_headers":`...)
	b = appendTime(b, rec.tHeaders)
	b = append(b, `,"t_first_token":`...)
	b = appendTime(b, rec.tFirstToken)
	b = append(b, `,"t_finish":`...)
	b = appendTime(b, rec.tFinish)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(rec.status), 10)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, rec.outcome)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(rec.outputTokens), 10)
	b = append(b, `,"model":`...)
	if rec.hasModel {
		b = appendJSONString(b, rec.model)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, rec.stream)
	b = append(b, `,"resumed":`...)
	b = strconv.AppendBool(b, rec.resumed)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, rec.path)
	b = append(b, `,"rule":`...)
	if rec.pl == nil || len(rec.pl.hit) == 0 {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, ruleNames(rec.pl.hit))
	}
	b = append(b, `,"replica":`...)
	b = appendJSONString(b, rec.replicaName)
	b = append(b, `,"upstream_status":`...)
	if rec.upstreamStatus == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(rec.upstreamStatus), 10)
	}
	return append(b, "}\n"...)
}
