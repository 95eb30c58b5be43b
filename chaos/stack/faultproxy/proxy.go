package main

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type proxy struct {
	name        string
	upstream    *url.URL
	upstreamStr string
	token       string
	transport   *http.Transport
	rules       ruleSet
	log         *requestLog
	requests    atomic.Int64
	inFlight    atomic.Int64
	readers     sync.Pool
	gate        *gate // --mirror-refusal: the data listener, closed while the upstream refuses (refusal.go)
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_chaos" || strings.HasPrefix(r.URL.Path, "/_chaos/") {
		p.admin(w, r)
		return
	}
	p.forward(w, r)
}

// exchange is one proxied request's state.
type exchange struct {
	p   *proxy
	w   http.ResponseWriter
	rc  *http.ResponseController
	ctx context.Context
	pl  *plan
	rec logRecord
	log bool
}

func (p *proxy) forward(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	x := &exchange{p: p, w: w, rc: http.NewResponseController(w), ctx: r.Context(),
		log: r.Method == http.MethodPost && p.log.enabled()}
	x.rec.tArrival = time.Now()
	x.rec.path = r.URL.Path
	x.rec.replicaName = p.name
	rid := r.Header.Get("X-Request-Id")
	if rid == "" {
		rid = newRequestID()
		r.Header.Set("X-Request-Id", rid)
	}
	x.rec.requestID = rid
	body, err := readBody(r)
	if err != nil {
		if x.ctx.Err() != nil {
			x.finish(0, "abort")
			return
		}
		x.answer(400, vllmError(400, "fault proxy: cannot read the request body: "+err.Error()), "")
		return
	}
	if len(body) > 0 {
		x.rec.model, x.rec.hasModel, x.rec.stream, x.rec.resumed, _ = scanRequest(body)
	}
	if rules := p.rules.load(); len(rules) > 0 {
		x.pl = evaluate(rules, r, x.rec.model, x.rec.hasModel)
		x.rec.pl = x.pl
		if !x.beforeUpstream() {
			return
		}
	}
	sent := time.Now()
	resp, err := p.transport.RoundTrip(p.upstreamRequest(r, body))
	if err != nil {
		if p.gate != nil && refusedDial(err) {
			p.gate.refused(err, sent) // before the answer: it goes out with Connection: close
		}
		if x.ctx.Err() != nil {
			x.finish(0, "abort")
			return
		}
		msg := "fault proxy: upstream " + p.upstreamStr + " not reachable: " + err.Error()
		x.answer(502, vllmError(502, msg), "")
		return
	}
	defer resp.Body.Close()
	x.rec.upstreamStatus = resp.StatusCode
	copyHeader(w.Header(), resp.Header)
	if _, ok := resp.Header["Content-Type"]; !ok {
		w.Header()["Content-Type"] = nil // the upstream sent none: net/http must not sniff one
	}
	if ct := resp.Header.Get("Content-Type"); len(ct) >= 17 && strings.EqualFold(ct[:17], "text/event-stream") {
		x.streamSSE(resp)
	} else {
		x.forwardBody(resp)
	}
}

// beforeUpstream applies header delays, then abort, oom or hang (every rule in the plan was
// created before the one that ended the evaluation); false when the request is over.
func (x *exchange) beforeUpstream() bool {
	pl := x.pl
	if d := pl.headerDelay(); d > 0 {
		for _, r := range pl.delays {
			if *r.spec.HeadersS > 0 {
				pl.applied(r)
			}
		}
		if !x.sleep(d) {
			x.finish(0, "abort")
			return false
		}
	}
	if r := pl.reject; r != nil {
		status, retry := 500, ""
		if r.spec.Kind == kAbort {
			status = *r.spec.Status
			if r.spec.RetryAfter != nil {
				retry = *r.spec.RetryAfter
			}
		}
		x.answer(status, r.errBody, retry)
		return false
	}
	if r := pl.hang; r != nil {
		select {
		case <-r.released:
		case <-x.ctx.Done():
			x.finish(0, "abort")
			return false
		}
	}
	return true
}

func (x *exchange) sleep(seconds float64) bool {
	t := time.NewTimer(time.Duration(seconds * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.ctx.Done():
		return false
	}
}

// finish writes the request-log line, once; status < 0 keeps the one already recorded.
func (x *exchange) finish(status int, outcome string) {
	if x.rec.logged {
		return
	}
	x.rec.logged = true
	if status >= 0 {
		x.rec.status = status
	}
	x.rec.outcome = outcome
	x.rec.tFinish = time.Now()
	x.rec.pauseUntil(x.rec.tFinish) // a stream cut or given up during a pause: that pause too
	if x.log {
		x.p.log.write(&x.rec)
	}
}

func outcomeForStatus(status int) string {
	switch {
	case status >= 500:
		return "error"
	case status >= 400:
		return "rejected"
	}
	return "ok"
}

// answer sends a whole JSON answer made by the proxy (logged first).
func (x *exchange) answer(status int, body []byte, retryAfter string) {
	h := x.w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	x.rec.tHeaders = time.Now()
	x.finish(status, outcomeForStatus(status))
	x.writeHeader(status)
	_, _ = x.w.Write(body)
}

// writeHeader applies the header rules and sends the status line.
func (x *exchange) writeHeader(status int) {
	if x.pl != nil {
		h := x.w.Header()
		for _, r := range x.pl.headers {
			for _, d := range r.spec.Drop {
				h[http.CanonicalHeaderKey(d)] = nil // nil, not deleted: net/http adds no default then
			}
			for k, v := range r.spec.Set {
				h.Set(k, v)
			}
			x.pl.applied(r)
		}
	}
	x.rec.status = status
	x.w.WriteHeader(status)
}
