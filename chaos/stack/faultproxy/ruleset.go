package main

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

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
