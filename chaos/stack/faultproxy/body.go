package main

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// forwardBody forwards a non-SSE answer. A JSON one is read whole (the rules and the log need
// it and it is small); anything else streams through.
func (x *exchange) forwardBody(resp *http.Response) {
	pl := x.pl
	bodyRules := pl != nil && (len(pl.rewrite) > 0 || len(pl.stream) > 0)
	if !isJSON(resp.Header.Get("Content-Type")) && !bodyRules {
		x.copyBody(resp)
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		if x.ctx.Err() != nil {
			x.finish(0, "abort")
			return
		}
		msg := "fault proxy: upstream " + x.p.upstreamStr + " broke off its answer: " + err.Error()
		x.answer(502, vllmError(502, msg), "")
		return
	}
	status, changed, outcome := resp.StatusCode, false, ""
	if pl != nil && status/100 == 2 {
		for _, r := range pl.stream {
			if r.spec.Kind == kMalformed && !changed {
				pl.applied(r)
				body, changed, outcome = body[:len(body)/2], true, "error"
			}
			if r.spec.Kind == kCorrupt && !changed {
				if out, ok := corruptText(body, r.insertJSON); ok {
					pl.applied(r)
					body, changed = out, true
				}
			}
		}
	}
	if pl != nil && len(pl.rewrite) > 0 {
		hit := false
		for _, r := range pl.rewrite {
			if out, ok := rewriteModel(body, r.modelJSON, nil); ok {
				body, changed, hit = out, true, true
			}
		}
		if hit {
			for _, r := range pl.rewrite {
				pl.applied(r)
			}
		}
	}
	if changed {
		x.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	if pl != nil && status/100 == 2 {
		for _, r := range pl.stream {
			switch r.spec.Kind {
			case kStall:
				pl.applied(r)
				x.sendHeaders(status)
				if x.rc.Flush() != nil || !x.sleep(*r.spec.Seconds) {
					x.finish(-1, "abort")
					return
				}
			case kCut:
				pl.applied(r)
				x.sendHeaders(status)
				x.finish(-1, "error")
				_ = x.rc.Flush()
				panic(http.ErrAbortHandler) // headers sent, the body never comes
			case kErrChunk:
				if x.rec.tHeaders.IsZero() { // after a stall the status is out already
					pl.applied(r)
					x.answer(500, r.errBody, "")
					return
				}
			}
		}
	}
	tokens := 0
	if x.log && status/100 == 2 {
		if n := completionTokens(body); n > 0 {
			tokens = n
		}
	}
	if tokens > 0 && pl != nil && pl.firstTokenDelay() > 0 {
		for _, r := range pl.delays {
			if *r.spec.HeadersS == 0 {
				pl.applied(r)
			}
		}
		if !x.sleep(pl.firstTokenDelay()) {
			x.finish(0, "abort")
			return
		}
	}
	if outcome == "" {
		outcome = outcomeForStatus(status)
		if status/100 == 2 {
			if f := finishReason(body); f != "" {
				outcome = f
			}
		}
	}
	x.sendHeaders(status)
	if tokens > 0 {
		x.rec.tFirstToken = time.Now()
		x.rec.outputTokens = tokens
	}
	x.finish(status, outcome) // logged before the client can see the end
	_, _ = x.w.Write(body)
}

// sendHeaders writes the status line once (it goes out with the next flush or the body).
func (x *exchange) sendHeaders(status int) {
	if x.rec.tHeaders.IsZero() {
		x.writeHeader(status)
		x.rec.tHeaders = time.Now()
	}
}

// copyBody streams any other answer through. For a logged request it holds back the last read
// until the log line is written.
func (x *exchange) copyBody(resp *http.Response) {
	x.writeHeader(resp.StatusCode)
	x.rec.tHeaders = time.Now()
	outcome := outcomeForStatus(resp.StatusCode)
	chunked := resp.ContentLength < 0
	bufs := [2][]byte{make([]byte, 32<<10), nil}
	if x.log {
		bufs[1] = make([]byte, 32<<10)
	}
	var pending []byte
	for i := 0; ; {
		n, err := resp.Body.Read(bufs[i])
		if n > 0 {
			if pending != nil || !x.log {
				out := pending
				if !x.log {
					out = bufs[i][:n]
				}
				if _, werr := x.w.Write(out); werr != nil {
					x.finish(-1, "abort")
					return
				}
				if chunked && x.rc.Flush() != nil {
					x.finish(-1, "abort")
					return
				}
			}
			if x.log {
				pending, i = bufs[i][:n], i^1
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if x.ctx.Err() != nil {
				x.finish(-1, "abort")
				return
			}
			x.finish(-1, "error")
			_ = x.rc.Flush()
			panic(http.ErrAbortHandler)
		}
	}
	x.finish(-1, outcome)
	if len(pending) > 0 {
		_, _ = x.w.Write(pending)
	}
}
