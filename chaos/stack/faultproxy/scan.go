package main

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Byte scanners for the few facts the proxy needs from JSON it forwards: decoding every chunk
// would cost more than the rest of the proxy. They assume well-formed JSON and stay safe on
// anything else (a wrong answer, never a panic).

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at b[i] == '"', or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the JSON value at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' &&
		b[j] != '\r' && b[j] != '\t' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// scanRequest reads the top-level `model`, `stream` and `continue_final_message` (a request that
// resumes a partial answer, vLLM's continuation flag) of a request body; ok is false when the body
// is not a JSON object.
func scanRequest(b []byte) (model string, hasModel, stream, resumed, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", false, false, false, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return "", false, false, false, skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return "", false, false, false, false
		}
		ke := stringEnd(b, i)
		if ke < 0 {
			return "", false, false, false, false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return "", false, false, false, false
		}
		i = skipWS(b, i+1)
		ve := skipValue(b, i)
		if ve < 0 {
			return "", false, false, false, false
		}
		switch string(key) {
		case "model":
			model, hasModel = "", false
			if b[i] == '"' {
				if s, err := decodeString(b[i:ve]); err == nil {
					model, hasModel = s, true
				}
			}
		case "stream":
			stream = string(b[i:ve]) == "true"
		case "continue_final_message":
			resumed = string(b[i:ve]) == "true"
		}
		i = skipWS(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			ok = skipWS(b, i+1) == len(b)
			if !ok {
				return "", false, false, false, false
			}
			return model, hasModel, stream, resumed, true
		}
		return "", false, false, false, false
	}
}

func decodeString(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

// keyValue finds the value of the next `"key":` at or after from; returns its start or -1.
func keyValue(b []byte, key string, from int) (start, next int) {
	for from < len(b) {
		k := bytes.Index(b[from:], []byte(key))
		if k < 0 {
			return -1, len(b)
		}
		j := skipWS(b, from+k+len(key))
		from = from + k + len(key)
		if j < len(b) && b[j] == ':' {
			return skipWS(b, j+1), from
		}
	}
	return -1, len(b)
}

// isTokenChunk: some choice has a non-empty delta.content (chat) or text (completions).
func isTokenChunk(d []byte) bool {
	for _, key := range [...]string{`"content"`, `"text"`} {
		for from := 0; ; {
			v, next := keyValue(d, key, from)
			if v < 0 {
				break
			}
			if v+1 < len(d) && d[v] == '"' && d[v+1] != '"' {
				return true
			}
			from = next
		}
	}
	return false
}

// finishReason is the last non-null finish_reason in d, or "".
func finishReason(d []byte) string {
	last := ""
	for from := 0; ; {
		v, next := keyValue(d, `"finish_reason"`, from)
		if v < 0 {
			return last
		}
		if v < len(d) && d[v] == '"' {
			if e := stringEnd(d, v); e > 0 {
				last = internReason(d[v+1 : e-1])
			}
		}
		from = next
	}
}

func internReason(b []byte) string {
	switch string(b) {
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "abort":
		return "abort"
	case "tool_calls":
		return "tool_calls"
	}
	return string(b)
}

// isErrorEvent: the chunk is vLLM's `{"error": {...}}`.
func isErrorEvent(d []byte) bool {
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	return bytes.HasPrefix(d[skipWS(d, i+1):], []byte(`"error"`))
}

// completionTokens is usage.completion_tokens of a JSON answer, or -1.
func completionTokens(b []byte) int {
	v, _ := keyValue(b, `"completion_tokens"`, 0)
	if v < 0 {
		return -1
	}
	e := v
	for e < len(b) && b[e] >= '0' && b[e] <= '9' {
		e++
	}
	n, err := strconv.Atoi(string(b[v:e]))
	if err != nil {
		return -1
	}
	return n
}

// rewriteModel replaces the string value of every "model" key, appending to scratch.
func rewriteModel(b, modelJSON []byte, scratch []byte) ([]byte, bool) {
	out := scratch[:0]
	copied := 0
	for from := 0; ; {
		v, next := keyValue(b, `"model"`, from)
		if v < 0 {
			break
		}
		from = next
		if v >= len(b) || b[v] != '"' {
			continue
		}
		e := stringEnd(b, v)
		if e < 0 {
			break
		}
		out = append(out, b[copied:v]...)
		out = append(out, modelJSON...)
		copied, from = e, e
	}
	if copied == 0 {
		return b, false
	}
	return append(out, b[copied:]...), true
}

// corruptText puts insert (JSON-escaped) at the head of the first non-empty "content" or "text"
// string in b: the answer reads differently, and stays valid JSON and a whole answer.
func corruptText(b, insert []byte) ([]byte, bool) {
	for _, key := range [...]string{`"content"`, `"text"`} {
		for from := 0; ; {
			v, next := keyValue(b, key, from)
			if v < 0 {
				break
			}
			if v+1 < len(b) && b[v] == '"' && b[v+1] != '"' {
				out := make([]byte, 0, len(b)+len(insert))
				out = append(append(append(out, b[:v+1]...), insert...), b[v+1:]...)
				return out, true
			}
			from = next
		}
	}
	return b, false
}
