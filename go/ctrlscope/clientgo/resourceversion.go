package clientgo

// The resourceVersion of the object a write returned (protocol v1.7: the write record's rv, which
// tells the controller's own write when its watch event comes back). Read from the JSON response
// without decoding it: the scanner walks the top-level object's keys, skipping values, enters
// "metadata" and stops at its "resourceVersion". The API server writes metadata third (after kind
// and apiVersion; sorted keys for custom resources put it before spec and status), and
// resourceVersion early in it, so a scan reads a few hundred bytes of the body, whatever its size.

import (
	"bytes"
	"encoding/json"
)

// MetadataResourceVersion is body's metadata.resourceVersion, if body is a JSON object that has one.
func MetadataResourceVersion(body []byte) (string, bool) {
	s := scanner{b: body}
	if !s.enterObject() || !s.seekKey("metadata") || !s.enterObject() || !s.seekKey("resourceVersion") {
		return "", false
	}
	return s.stringValue()
}

// scanner reads JSON from b at i. Its methods return false on anything not well formed.
type scanner struct {
	b []byte
	i int
	// first: the next nextKey is the object's first (no comma before it).
	first bool
}

// seekKey moves to the value of key name in the object being read, skipping the keys before it.
func (s *scanner) seekKey(name string) bool {
	for {
		key, ok := s.nextKey()
		if !ok {
			return false
		}
		if string(key) == name {
			return true
		}
		if !s.skipValue() {
			return false
		}
	}
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) enterObject() bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.first = true
	return true
}

// nextKey reads the next key of the object being read and the colon after it; false at its end.
func (s *scanner) nextKey() ([]byte, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] == '}' {
		return nil, false
	}
	if !s.first {
		if s.b[s.i] != ',' {
			return nil, false
		}
		s.i++
		s.space()
	}
	s.first = false
	key, ok := s.rawString()
	if !ok {
		return nil, false
	}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return nil, false
	}
	s.i++
	return key, true
}

// rawString reads a string and returns its bytes between the quotes, escapes as they are (a key is
// compared with one of ours, which have none; a value is decoded by stringValue).
func (s *scanner) rawString() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			j++
		case '"':
			s.i = j + 1
			return s.b[start:j], true
		}
	}
	return nil, false
}

// stringValue reads a string value, unescaped.
func (s *scanner) stringValue() (string, bool) {
	s.space()
	start := s.i
	raw, ok := s.rawString()
	if !ok {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') >= 0 {
		var v string
		if json.Unmarshal(s.b[start:s.i], &v) != nil {
			return "", false
		}
		return v, true
	}
	return string(raw), true
}

// skipValue steps over one value: a string, an object or array (brackets counted outside strings),
// or a literal or number (up to the next delimiter).
func (s *scanner) skipValue() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		_, ok := s.rawString()
		return ok
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, ok := s.rawString(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return true
		}
		s.i++
	}
	return true
}
