package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

const (
	readerSize = 32 << 10
	maxEvent   = 1 << 20
)

func (p *proxy) getReader(r io.Reader) *bufio.Reader {
	if br, ok := p.readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, readerSize)
}

func (p *proxy) putReader(br *bufio.Reader) {
	br.Reset(nil)
	p.readers.Put(br)
}

// sse is one SSE answer being forwarded event by event.
type sse struct {
	x          *exchange
	tokens     int
	finish     string    // the last finish_reason seen
	errored    bool      // an error event went to the client
	fired      []bool    // per plan.stream rule
	firstDelay bool      // the first-token delay was dealt with
	data       []byte    // scratch for multi-line data
	rw         [2][]byte // scratch for rewrite_model, used in turn
	rwi        int
	rewroteHit bool
}

func (s *sse) outcome() string {
	if s.errored || s.finish == "" {
		return "error"
	}
	return s.finish
}

// headerHold keeps a stream's response headers for the first event's write: a separate segment
// for the headers alone costs the client a read per request (measured: 0.65-0.71 -> 0.76-0.80 of
// direct throughput at 64 streams). A stream whose first event takes longer than headerHoldMax
// gets its headers on their own, so a long prefill never looks like a dead upstream.
type headerHold struct {
	x    *exchange
	mu   sync.Mutex
	sent bool
	t    *time.Timer
}

const headerHoldMax = 5 * time.Millisecond

func (x *exchange) holdHeaders() *headerHold {
	h := &headerHold{x: x}
	h.t = time.AfterFunc(headerHoldMax, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.sent {
			h.sent = true
			if h.x.rc.Flush() == nil {
				h.x.rec.tHeaders = time.Now()
			}
		}
	})
	return h
}

// release hands the writer back to the stream's goroutine; the headers go out with its next flush.
func (h *headerHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.sent {
		h.t.Stop()
		h.sent = true
		h.x.rec.tHeaders = time.Now()
	}
}

// streamSSE forwards the upstream's events as they come. It flushes only when the upstream
// reader holds nothing more, so a burst goes out in one write, and it never reads ahead of
// what the client took: a slow client slows the upstream.
func (x *exchange) streamSSE(resp *http.Response) {
	x.writeHeader(resp.StatusCode)
	hold := x.holdHeaders()
	s := &sse{x: x}
	if x.pl != nil {
		s.fired = make([]bool, len(x.pl.stream))
	}
	br := x.p.getReader(resp.Body)
	defer x.p.putReader(br)
	ev := make([]byte, 0, 1024)
	for {
		line, err := br.ReadSlice('\n')
		if hold != nil {
			hold.release()
			hold = nil
		}
		ev = append(ev, line...)
		if err == bufio.ErrBufferFull {
			if len(ev) > maxEvent { // no blank line in sight: pass it on uninspected
				if !s.write(ev) {
					return
				}
				ev = ev[:0]
			}
			continue
		}
		if err != nil {
			if err == io.EOF && x.ctx.Err() == nil {
				if len(ev) > 0 && !s.event(ev) {
					return
				}
				x.finish(-1, s.outcome())
				return
			}
			_ = x.rc.Flush()
			if x.ctx.Err() != nil {
				x.finish(-1, "abort")
				return
			}
			x.finish(-1, "error")
			panic(http.ErrAbortHandler) // the upstream broke off: so does the client's body
		}
		if len(line) > 2 || (line[0] != '\n' && (line[0] != '\r' || len(line) != 2)) {
			continue
		}
		if !s.event(ev) {
			return
		}
		ev = ev[:0]
		if br.Buffered() == 0 {
			if err := x.rc.Flush(); err != nil {
				x.finish(-1, "abort")
				return
			}
		}
	}
}

// eventData is the data of an event (its data lines joined), nil when it has none.
func (s *sse) eventData(ev []byte) []byte {
	var first []byte
	n := 0
	for len(ev) > 0 {
		i := bytes.IndexByte(ev, '\n')
		line := ev
		if i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		v := line[5:]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		n++
		switch n {
		case 1:
			first = v
		case 2:
			s.data = append(append(append(s.data[:0], first...), '\n'), v...)
		default:
			s.data = append(append(s.data, '\n'), v...)
		}
	}
	if n > 1 {
		return s.data
	}
	if n == 1 && first == nil {
		return []byte{}
	}
	return first
}

// event forwards one event, applying the stream rules; false when the exchange is over.
func (s *sse) event(ev []byte) bool {
	x := s.x
	read := time.Now() // before any injected stall: the pause the upstream made, not ours
	data := s.eventData(ev)
	isDone := bytes.Equal(data, []byte("[DONE]"))
	isTok, isErr, fin := false, false, ""
	if len(data) > 0 && !isDone {
		isErr = isErrorEvent(data)
		if !isErr {
			isTok = isTokenChunk(data)
			fin = finishReason(data)
		}
	}
	dup := false
	if pl := x.pl; pl != nil {
		marker := isTok || isDone || isErr || fin != ""
		for i, r := range pl.stream {
			if s.fired[i] || s.tokens < r.after || (!marker || ((r.spec.Kind == kDuplicate || r.spec.Kind == kCorrupt) && !isTok)) {
				continue
			}
			s.fired[i] = true
			pl.applied(r)
			switch r.spec.Kind {
			case kDuplicate:
				dup = true
			case kCorrupt:
				ev, _ = corruptText(ev, r.insertJSON)
			case kStall:
				if x.rc.Flush() != nil || !x.sleep(*r.spec.Seconds) {
					x.finish(-1, "abort")
					return false
				}
			case kMalformed:
				if !s.write([]byte(malformedEvent)) {
					return false
				}
			case kErrChunk:
				x.finish(-1, "error")
				chunk := append(append([]byte("data: "), r.errBody...), "\n\n"+doneEvent...)
				_, _ = x.w.Write(chunk)
				return false
			case kCut:
				x.finish(-1, "error")
				if *r.spec.Done {
					_, _ = x.w.Write([]byte(doneEvent))
					return false
				}
				_ = x.rc.Flush()
				panic(http.ErrAbortHandler) // a broken chunked body, never a clean end
			}
		}
		if isTok && !s.firstDelay {
			s.firstDelay = true
			if d := pl.firstTokenDelay(); d > 0 {
				for _, r := range pl.delays {
					if *r.spec.HeadersS == 0 {
						pl.applied(r)
					}
				}
				if x.rc.Flush() != nil || !x.sleep(d) {
					x.finish(-1, "abort")
					return false
				}
			}
		}
		for _, r := range pl.rewrite {
			out, changed := rewriteModel(ev, r.modelJSON, s.rw[s.rwi][:0])
			if !changed {
				continue
			}
			s.rw[s.rwi], s.rwi, ev = out[:0], s.rwi^1, out
			if !s.rewroteHit {
				s.rewroteHit = true
				for _, r := range pl.rewrite {
					pl.applied(r)
				}
			}
		}
	}
	if isDone {
		x.finish(-1, s.outcome()) // logged before the client can see the end
	}
	if !s.write(ev) || (dup && !s.write(ev)) {
		return false
	}
	if isTok {
		if s.tokens == 0 {
			x.rec.tFirstToken = time.Now()
		}
		x.rec.tokenAt(read, time.Now())
		s.tokens++
		x.rec.outputTokens++
		if dup {
			x.rec.outputTokens++
		}
	}
	if fin != "" {
		s.finish = fin
	}
	if isErr {
		s.errored = true
	}
	return true
}

func (s *sse) write(b []byte) bool {
	if _, err := s.x.w.Write(b); err != nil {
		s.x.finish(-1, "abort")
		return false
	}
	return true
}
