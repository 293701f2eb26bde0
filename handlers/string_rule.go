package handlers

import (
	"reflect"
	"regexp"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

// stringRule is a string schema of openapi.yaml compiled for the push's
// per-item checks: kin-openapi's VisitJSON allocates and walks the schema
// for every value, and a push of 100 messages has 100 distinct
// transactionIds. It only says yes quickly: a value it refuses is checked
// again by VisitJSON, which words the refusal (and has the last word), so
// the 400's text is unchanged. TestStringRuleAgreesWithSchema and
// FuzzStringRule hold it to never passing what VisitJSON refuses.
type stringRule struct {
	minLength uint64
	maxLength *uint64
	patterns  []*regexp.Regexp
}

// compileStringRule compiles s, or reports false when s uses anything
// beyond type string, nullable, minLength, maxLength, pattern and allOf of
// such schemas (then every value goes to VisitJSON).
func compileStringRule(s *openapi3.Schema) (*stringRule, bool) {
	r := &stringRule{}
	return r, r.add(s)
}

func (r *stringRule) add(s *openapi3.Schema) bool {
	if s.Type != nil && !s.Type.Is(openapi3.TypeString) {
		return false
	}
	rest := *s
	rest.Extensions, rest.Origin, rest.Type, rest.Description, rest.Title = nil, nil, nil, "", ""
	rest.Nullable, rest.MinLength, rest.MaxLength, rest.Pattern, rest.AllOf = false, 0, nil, "", nil
	if !reflect.DeepEqual(rest, openapi3.Schema{}) {
		return false
	}
	r.minLength = max(r.minLength, s.MinLength)
	if s.MaxLength != nil && (r.maxLength == nil || *s.MaxLength < *r.maxLength) {
		r.maxLength = s.MaxLength
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return false
		}
		r.patterns = append(r.patterns, re)
	}
	for _, sub := range s.AllOf {
		if sub.Value == nil || !r.add(sub.Value) {
			return false
		}
	}
	return true
}

// passes reports whether v certainly satisfies the schema.
func (r *stringRule) passes(v string) bool {
	// The length as kin-openapi counts it: runes (an invalid byte is one).
	// A string has no more runes than bytes, and a non-empty one at least
	// one, so the byte count mostly settles it.
	n := uint64(len(v))
	if n < r.minLength || r.minLength > 1 || (r.maxLength != nil && n > *r.maxLength) {
		n = uint64(utf8.RuneCountInString(v))
	}
	if n < r.minLength || (r.maxLength != nil && n > *r.maxLength) {
		return false
	}
	for _, re := range r.patterns {
		if !re.MatchString(v) {
			return false
		}
	}
	return true
}
