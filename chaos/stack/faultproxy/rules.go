package main

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Rule kinds.
const (
	kAbort     = "abort"
	kOOM       = "oom"
	kDelay     = "delay"
	kStall     = "stall"
	kCut       = "cut"
	kErrChunk  = "error_chunk"
	kMalformed = "malformed_chunk"
	kDuplicate = "duplicate_chunk"
	kRewrite   = "rewrite_model"
	kHeader    = "header"
	kHang      = "hang"
	kCorrupt   = "corrupt_answer"
)

// corruptInsert is what corrupt_answer puts at the head of an answer's text by default.
const corruptInsert = "corrupted "

var kindNames = []string{kAbort, kOOM, kDelay, kStall, kCut, kErrChunk, kMalformed, kDuplicate,
	kRewrite, kHeader, kHang, kCorrupt}

type matchSpec struct {
	Path   *string           `json:"path,omitempty"`
	Model  *string           `json:"model,omitempty"`
	Header map[string]string `json:"header,omitempty"`
}

// ruleSpec is a rule as the admin API shows it: every field of its kind, defaults filled in.
type ruleSpec struct {
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	Fraction    float64           `json:"fraction"`
	Spread      string            `json:"spread"`
	Seed        int64             `json:"seed"`
	Limit       *int64            `json:"limit,omitempty"`
	Match       *matchSpec        `json:"match,omitempty"`
	Status      *int              `json:"status,omitempty"`
	RetryAfter  *string           `json:"retry_after,omitempty"`
	Message     *string           `json:"message,omitempty"`
	HeadersS    *float64          `json:"headers_s,omitempty"`
	FirstTokenS *float64          `json:"first_token_s,omitempty"`
	AfterTokens *int              `json:"after_tokens,omitempty"`
	Seconds     *float64          `json:"seconds,omitempty"`
	Done        *bool             `json:"done,omitempty"`
	Code        *int              `json:"code,omitempty"`
	Model       *string           `json:"model,omitempty"`
	Drop        []string          `json:"drop,omitempty"`
	Set         map[string]string `json:"set,omitempty"`
	Insert      *string           `json:"insert,omitempty"`
}

type ruleView struct {
	ruleSpec
	Seen    int64   `json:"seen"`
	Matched int64   `json:"matched"`
	Hits    int64   `json:"hits"`
	Created float64 `json:"created"`
}

type rule struct {
	spec    ruleSpec
	seq     uint64
	created float64

	seen, matched, hits atomic.Int64
	granted             atomic.Int64 // requests the coin picked, for `limit`

	rngMu sync.Mutex
	rng   *rand.Rand

	released chan struct{} // closed when the rule leaves the set: held (hang) requests go on

	// precomputed from spec for the hot path
	pathPrefix  bool
	path        string
	after       int
	errBody     []byte // abort / oom / error_chunk answer
	modelJSON   []byte // rewrite_model: the new value, JSON-encoded
	insertJSON  []byte // corrupt_answer: the text put in, JSON-escaped (no quotes)
	stopsEval   bool   // abort, oom, hang
	streamFault bool   // stall, cut, error_chunk, malformed_chunk, duplicate_chunk
}

func newRule(spec ruleSpec, seq uint64) *rule {
	r := &rule{spec: spec, seq: seq, created: epoch(time.Now()), released: make(chan struct{})}
	if spec.Spread == "random" {
		r.rng = rand.New(rand.NewPCG(uint64(spec.Seed), 0x9e3779b97f4a7c15))
	}
	if m := spec.Match; m != nil && m.Path != nil {
		r.path = *m.Path
		if strings.HasSuffix(r.path, "*") {
			r.pathPrefix, r.path = true, strings.TrimSuffix(r.path, "*")
		}
	}
	if spec.AfterTokens != nil {
		r.after = *spec.AfterTokens
	}
	switch spec.Kind {
	case kAbort:
		r.errBody = vllmError(*spec.Status, *spec.Message)
	case kOOM:
		r.errBody = vllmError(500, oomMessage)
	case kErrChunk:
		r.errBody = vllmError(*spec.Code, *spec.Message)
	case kRewrite:
		r.modelJSON = appendJSONString(nil, *spec.Model)
	case kCorrupt:
		q := appendJSONString(nil, *spec.Insert)
		r.insertJSON = q[1 : len(q)-1]
	}
	r.stopsEval = spec.Kind == kAbort || spec.Kind == kOOM || spec.Kind == kHang
	switch spec.Kind {
	case kStall, kCut, kErrChunk, kMalformed, kDuplicate:
		r.streamFault = true
	}
	return r
}

func (r *rule) view() ruleView {
	return ruleView{ruleSpec: r.spec, Seen: r.seen.Load(), Matched: r.matched.Load(),
		Hits: r.hits.Load(), Created: r.created}
}

func (r *rule) matches(req *http.Request, model string, hasModel bool) bool {
	m := r.spec.Match
	if m == nil {
		return true
	}
	if m.Path != nil {
		if r.pathPrefix {
			if !strings.HasPrefix(req.URL.Path, r.path) {
				return false
			}
		} else if req.URL.Path != r.path {
			return false
		}
	}
	if m.Model != nil && (!hasModel || model != *m.Model) {
		return false
	}
	for k, v := range m.Header {
		if req.Header.Get(k) != v {
			return false
		}
	}
	return true
}

// coin counts a matching request and says whether the fault hits it; with `limit` it picks at
// most that many requests, then none (a burst: exactly N OOM answers, however fast the traffic).
func (r *rule) coin() bool {
	if !r.toss() {
		return false
	}
	return r.spec.Limit == nil || r.granted.Add(1) <= *r.spec.Limit
}

// toss is the fraction's decision. `even` hits the n-th matching request when floor(n*f) steps
// up, so any window of 1/f requests holds one hit.
func (r *rule) toss() bool {
	n := r.matched.Add(1)
	f := r.spec.Fraction
	switch {
	case f >= 1:
		return true
	case f <= 0:
		return false
	case r.rng != nil:
		r.rngMu.Lock()
		x := r.rng.Float64()
		r.rngMu.Unlock()
		return x < f
	}
	const eps = 1e-9 // 0.57*100 is 56.99999999999999 in floating point
	return math.Floor(float64(n)*f+eps) > math.Floor(float64(n-1)*f+eps)
}
