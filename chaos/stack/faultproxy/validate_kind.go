package main

import (
	"encoding/json"
	"sort"
)

func parseMatch(f fieldSet) (*matchSpec, error) {
	raw, ok := f.get("match")
	if !ok {
		return nil, nil
	}
	var mf fieldSet
	if json.Unmarshal(raw, &mf) != nil || mf == nil {
		return nil, bad("match", "expected an object {path, model, header}, got %s", shown(raw))
	}
	keys := make([]string, 0, len(mf))
	for k := range mf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m := &matchSpec{}
	for _, k := range keys {
		raw, present := mf.get(k)
		switch k {
		case "path", "model":
			if !present {
				continue
			}
			s, isStr := asString(raw)
			if !isStr || (k == "path" && s == "") {
				return nil, bad("match."+k, "expected a non-empty string, got %s", shown(raw))
			}
			if k == "path" {
				m.Path = &s
			} else {
				m.Model = &s
			}
		case "header":
			if !present {
				continue
			}
			h, err := parseStringMap("match.header", raw)
			if err != nil {
				return nil, err
			}
			m.Header = h
		default:
			return nil, bad("match."+k, "unknown field (match takes path, model, header)")
		}
	}
	return m, nil
}

func parseStringMap(field string, raw json.RawMessage) (map[string]string, error) {
	var obj fieldSet
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, bad(field, "expected an object of header name -> string, got %s", shown(raw))
	}
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		if !validHeaderName(k) {
			return nil, bad(field, "%q is not a valid header name", k)
		}
		s, ok := asString(v)
		if !ok || !validHeaderValue(s) {
			return nil, bad(field+"."+k, "expected a header value string, got %s", shown(v))
		}
		out[k] = s
	}
	return out, nil
}

func positive(v float64) bool    { return v > 0 }
func nonNegative(v float64) bool { return v >= 0 }

// parseKind reads the kind's own fields, defaults filled in.
func parseKind(f fieldSet, s *ruleSpec) error {
	var err error
	afterTokens := func() error {
		s.AfterTokens, err = f.integer("after_tokens", 4, 0, 1<<31-1, "an integer >= 0")
		return err
	}
	switch s.Kind {
	case kAbort:
		if s.Status, err = f.integer("status", 503, 400, 599, "an integer in [400, 599]"); err != nil {
			return err
		}
		if s.RetryAfter, err = f.str("retry_after", nil); err != nil {
			return err
		}
		if s.RetryAfter != nil && !validHeaderValue(*s.RetryAfter) {
			return bad("retry_after", "expected a header value (no line breaks)")
		}
		def := defaultAbortMessage(s.Name)
		s.Message, err = f.str("message", &def)
		return err
	case kDelay:
		if s.HeadersS, err = f.number("headers_s", 0, nonNegative, "a number >= 0"); err != nil {
			return err
		}
		if s.FirstTokenS, err = f.number("first_token_s", 0, nonNegative, "a number >= 0"); err != nil {
			return err
		}
		if *s.HeadersS == 0 && *s.FirstTokenS == 0 {
			return bad("headers_s", "one of headers_s, first_token_s must be > 0")
		}
	case kStall:
		if err = afterTokens(); err != nil {
			return err
		}
		s.Seconds, err = f.number("seconds", 5, positive, "a number > 0")
		return err
	case kCut:
		if err = afterTokens(); err != nil {
			return err
		}
		done := false
		if raw, ok := f.get("done"); ok {
			if string(raw) != "true" && string(raw) != "false" {
				return bad("done", "expected a boolean, got %s", shown(raw))
			}
			done = string(raw) == "true"
		}
		s.Done = &done
	case kErrChunk:
		if err = afterTokens(); err != nil {
			return err
		}
		def := engineDeadMessage
		if s.Message, err = f.str("message", &def); err != nil {
			return err
		}
		s.Code, err = f.integer("code", 500, 100, 599, "an integer in [100, 599]")
		return err
	case kMalformed, kDuplicate:
		return afterTokens()
	case kRewrite:
		raw, ok := f.get("model")
		if !ok {
			return bad("model", "required for kind rewrite_model")
		}
		m, isStr := asString(raw)
		if !isStr || m == "" {
			return bad("model", "expected a non-empty string, got %s", shown(raw))
		}
		s.Model = &m
	case kHeader:
		return parseHeaderKind(f, s)
	case kCorrupt:
		if s.AfterTokens, err = f.integer("after_tokens", 0, 0, 1<<31-1, "an integer >= 0"); err != nil {
			return err
		}
		def := corruptInsert
		if s.Insert, err = f.str("insert", &def); err != nil {
			return err
		}
		if *s.Insert == "" {
			return bad("insert", "expected a non-empty string")
		}
	}
	return nil
}

func parseHeaderKind(f fieldSet, s *ruleSpec) error {
	if raw, ok := f.get("drop"); ok {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || raw[0] != '[' {
			return bad("drop", "expected a list of header names, got %s", shown(raw))
		}
		for i, v := range list {
			name, isStr := asString(v)
			if !isStr || !validHeaderName(name) {
				return bad("drop", "item %d: expected a header name, got %s", i, shown(v))
			}
			s.Drop = append(s.Drop, name)
		}
	}
	if raw, ok := f.get("set"); ok {
		m, err := parseStringMap("set", raw)
		if err != nil {
			return err
		}
		s.Set = m
	}
	if len(s.Drop) == 0 && len(s.Set) == 0 {
		return bad("drop", "one of drop, set must be non-empty")
	}
	return nil
}
