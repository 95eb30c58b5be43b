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
	tLastToken     time.Time   // a stream's last token event, read from upstream
	gaps           []decodeGap // its pauses of decodeGapMin or more, the first maxDecodeGaps of them
	gapsDropped    int         // pauses past maxDecodeGaps: the stream's pauses are then not all known
}

// A stream's pauses between token events, as the upstream sent them (the proxy's own injected stalls
// and the client's slow reads are not in them). A replica whose every decoding stream paused at once
// made no progress then, whatever its /health said (chaos.verify.stream_progress); outside its pauses a
// stream got a token at least every decodeGapMin.
const (
	decodeGapMin  = 500 * time.Millisecond
	maxDecodeGaps = 16
)

type decodeGap struct {
	start time.Time
	d     time.Duration
}

// tokenAt notes a token event read from upstream at read and passed on at done: the pause since the
// one before it is kept if long enough, counted from when the proxy was done with that one (so a stall
// the proxy injected, or a client slow to read, is no pause of the upstream's).
func (rec *logRecord) tokenAt(read, done time.Time) {
	rec.pauseUntil(read)
	rec.tLastToken = done
}

// pauseUntil keeps the pause from the last token event to t (a next token, or the stream's end).
func (rec *logRecord) pauseUntil(t time.Time) {
	if rec.tLastToken.IsZero() {
		return
	}
	if d := t.Sub(rec.tLastToken); d >= decodeGapMin {
		if len(rec.gaps) < maxDecodeGaps {
			rec.gaps = append(rec.gaps, decodeGap{rec.tLastToken, d})
		} else {
			rec.gapsDropped++
		}
	}
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
	if !rec.tLastToken.IsZero() { // a stream that carried tokens: its pauses, none when it never paused
		b = append(b, `,"decode_gaps":{"min_s":`...)
		b = strconv.AppendFloat(b, decodeGapMin.Seconds(), 'f', -1, 64)
		b = append(b, `,"spans":[`...)
		for i, g := range rec.gaps {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = appendTime(b, g.start)
			b = append(b, ',')
			b = strconv.AppendFloat(b, g.d.Seconds(), 'f', 6, 64)
			b = append(b, ']')
		}
		b = append(b, `],"dropped":`...)
		b = strconv.AppendInt(b, int64(rec.gapsDropped), 10)
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}
