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
)

var kindNames = []string{kAbort, kOOM, kDelay, kStall, kCut, kErrChunk, kMalformed, kDuplicate,
	kRewrite, kHeader, kHang}

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

	rngMu sync.Mutex
	rng   *rand.Rand

	released chan struct{} // closed when the rule leaves the set: held (hang) requests go on

	// precomputed from spec for the hot path
	pathPrefix  bool
	path        string
	after       int
	errBody     []byte // abort / oom / error_chunk answer
	modelJSON   []byte // rewrite_model: the new value, JSON-encoded
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

// coin counts a matching request and says whether the fault hits it. `even` hits the n-th
// matching request when floor(n*f) steps up, so any window of 1/f requests holds one hit.
func (r *rule) coin() bool {
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

// ruleSet is copy-on-write: the proxy's hot path is one atomic load.
type ruleSet struct {
	mu  sync.Mutex
	cur atomic.Pointer[[]*rule]
	seq uint64
}

func (s *ruleSet) load() []*rule {
	if p := s.cur.Load(); p != nil {
		return *p
	}
	return nil
}

// put adds spec as a new rule; a rule of the same name is replaced (and its held requests go on).
func (s *ruleSet) put(spec ruleSpec) *rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r := newRule(spec, s.seq)
	old := s.load()
	next := make([]*rule, 0, len(old)+1)
	for _, o := range old {
		if o.spec.Name == spec.Name {
			close(o.released)
			continue
		}
		next = append(next, o)
	}
	next = append(next, r)
	s.cur.Store(&next)
	return r
}

// remove takes out the rules keep rejects and returns them.
func (s *ruleSet) remove(drop func(*rule) bool) []*rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.load()
	next := make([]*rule, 0, len(old))
	var gone []*rule
	for _, o := range old {
		if drop(o) {
			close(o.released)
			gone = append(gone, o)
		} else {
			next = append(next, o)
		}
	}
	s.cur.Store(&next)
	return gone
}

// plan is what the rules decided for one request.
type plan struct {
	hit     []*rule // applied so far, for the log
	reject  *rule   // abort / oom
	hang    *rule
	delays  []*rule
	stream  []*rule // stream kinds in creation order
	rewrite []*rule
	headers []*rule
}

func (p *plan) applied(r *rule) {
	r.hits.Add(1)
	p.hit = append(p.hit, r)
}

func evaluate(rules []*rule, req *http.Request, model string, hasModel bool) *plan {
	p := &plan{}
	stopped := false
	for _, r := range rules {
		r.seen.Add(1)
		if stopped || !r.matches(req, model, hasModel) || !r.coin() {
			continue
		}
		switch r.spec.Kind {
		case kAbort, kOOM:
			p.reject = r
			p.applied(r)
		case kHang:
			p.hang = r
			p.applied(r)
		case kDelay:
			p.delays = append(p.delays, r)
		case kRewrite:
			p.rewrite = append(p.rewrite, r)
		case kHeader:
			p.headers = append(p.headers, r)
		default:
			p.stream = append(p.stream, r)
		}
		stopped = r.stopsEval
	}
	return p
}

func (p *plan) headerDelay() float64 {
	var d float64
	for _, r := range p.delays {
		d += *r.spec.HeadersS
	}
	return d
}

func (p *plan) firstTokenDelay() float64 {
	var d float64
	for _, r := range p.delays {
		d += *r.spec.FirstTokenS
	}
	return d
}

// ruleNames is the log's `rule` field: the names of the rules that hit, in creation order.
func ruleNames(hit []*rule) string {
	if len(hit) == 1 {
		return hit[0].spec.Name
	}
	s := append([]*rule(nil), hit...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].seq < s[j-1].seq; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	names := make([]string, len(s))
	for i, r := range s {
		names[i] = r.spec.Name
	}
	return strings.Join(names, ",")
}
