package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

const maxAdminBody = 1 << 20

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = 500
		buf.Reset()
		buf.WriteString(`{"error": "cannot encode the answer"}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func adminError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (p *proxy) authorized(r *http.Request) bool {
	got := r.Header.Get("Authorization")
	want := "Bearer " + p.token
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

type health struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Requests int64  `json:"requests"`
	InFlight int64  `json:"in_flight"`
	Rules    int    `json:"rules"`
	Refusing bool   `json:"refusing"` // --mirror-refusal: the data port is closed, the upstream refuses
}

// adminOnly serves --admin-listen: the admin API, nothing proxied.
func (p *proxy) adminOnly(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_chaos" || strings.HasPrefix(r.URL.Path, "/_chaos/") {
		p.admin(w, r)
		return
	}
	adminError(w, 404, "the admin listener serves /_chaos/ only; "+r.URL.Path+" goes to --listen")
}

func (p *proxy) admin(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path == "/_chaos/health" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			adminError(w, 405, "method "+r.Method+" not allowed on /_chaos/health (GET)")
			return
		}
		writeJSON(w, 200, health{Name: p.name, Upstream: p.upstreamStr, Requests: p.requests.Load(),
			InFlight: p.inFlight.Load(), Rules: len(p.rules.load()),
			Refusing: p.gate != nil && p.gate.closed()})
		return
	}
	if !p.authorized(r) {
		adminError(w, 401, "unauthorized: expected Authorization: Bearer <token>")
		return
	}
	switch {
	case path == "/_chaos/log":
		p.serveLog(w, r)
	case path == "/_chaos/rules":
		switch r.Method {
		case http.MethodGet:
			p.listRules(w)
		case http.MethodPost:
			p.postRule(w, r)
		case http.MethodDelete:
			p.deletePrefix(w, r)
		default:
			adminError(w, 405, "method "+r.Method+" not allowed on /_chaos/rules (GET, POST, DELETE)")
		}
	case strings.HasPrefix(path, "/_chaos/rules/"):
		name := strings.TrimPrefix(path, "/_chaos/rules/")
		switch r.Method {
		case http.MethodGet:
			for _, rl := range p.rules.load() {
				if rl.spec.Name == name {
					writeJSON(w, 200, rl.view())
					return
				}
			}
			adminError(w, 404, "rule "+name+": no such rule")
		case http.MethodDelete:
			gone := p.rules.remove(func(rl *rule) bool { return rl.spec.Name == name })
			if len(gone) == 0 {
				adminError(w, 404, "rule "+name+": no such rule")
				return
			}
			writeJSON(w, 200, gone[0].view())
		default:
			adminError(w, 405, "method "+r.Method+" not allowed on /_chaos/rules/NAME (GET, DELETE)")
		}
	default:
		adminError(w, 404, "no admin endpoint "+path+" (/_chaos/health, /_chaos/rules, /_chaos/log)")
	}
}

func (p *proxy) listRules(w http.ResponseWriter) {
	rules := p.rules.load()
	views := make([]ruleView, len(rules))
	for i, rl := range rules {
		views[i] = rl.view()
	}
	writeJSON(w, 200, map[string]any{"rules": views})
}

func (p *proxy) postRule(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	if err != nil {
		adminError(w, 400, "rule: cannot read the request body: "+err.Error())
		return
	}
	if len(body) > maxAdminBody {
		adminError(w, 413, "rule: body over 1 MiB")
		return
	}
	spec, err := parseRule(body)
	if err != nil {
		adminError(w, 400, err.Error())
		return
	}
	writeJSON(w, 201, p.rules.put(spec).view())
}

func (p *proxy) deletePrefix(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	gone := p.rules.remove(func(rl *rule) bool { return strings.HasPrefix(rl.spec.Name, prefix) })
	names := make([]string, len(gone))
	for i, rl := range gone {
		names[i] = rl.spec.Name
	}
	writeJSON(w, 200, map[string]any{"removed": names})
}
