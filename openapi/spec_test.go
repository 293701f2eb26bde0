package openapi_test

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
)

// The spec is what clients are generated from (gen/client, sdk/typescript,
// any generator a user points at it), so it is held to more than "it
// parses": these are the rules a generator needs.

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("openapi.yaml")
	require.NoError(t, err)
	return doc
}

type operation struct {
	method, path string
	op           *openapi3.Operation
}

func operations(doc *openapi3.T) []operation {
	var ops []operation
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			ops = append(ops, operation{method, path, op})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].op.OperationID < ops[j].op.OperationID })
	return ops
}

// kin-openapi's validation: the document is OpenAPI 3.0 as written, every
// $ref resolves, and every example matches its schema.
func TestSpecValidates(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	require.NoError(t, doc.Validate(t.Context(), openapi3.EnableExamplesValidation()))
}

// Every operation has an id, a summary, one declared tag and an access
// level; every declared tag is used.
func TestSpecOperationsAreComplete(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	declared := map[string]bool{}
	for _, tag := range doc.Tags {
		require.NotEmpty(t, tag.Description, "tag %s", tag.Name)
		declared[tag.Name] = true
	}
	used := map[string]bool{}
	for _, o := range operations(doc) {
		name := o.method + " " + o.path
		require.NotEmpty(t, o.op.OperationID, name)
		require.NotEmpty(t, o.op.Summary, name)
		require.Len(t, o.op.Tags, 1, name)
		require.True(t, declared[o.op.Tags[0]], "%s: tag %q is not declared", name, o.op.Tags[0])
		used[o.op.Tags[0]] = true
		require.Contains(t, o.op.Extensions, "x-queen-access", name)
	}
	for tag := range declared {
		require.True(t, used[tag], "tag %q is declared but no operation uses it", tag)
	}
}

// Bearer auth is a declared scheme that applies to every operation; the
// public ones (x-queen-access: public) say that anonymous callers pass.
func TestSpecSecurity(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	scheme := doc.Components.SecuritySchemes["bearerAuth"]
	require.NotNil(t, scheme)
	require.Equal(t, "http", scheme.Value.Type)
	require.Equal(t, "bearer", scheme.Value.Scheme)
	require.Equal(t, openapi3.SecurityRequirements{{"bearerAuth": {}}}, doc.Security)
	for _, o := range operations(doc) {
		if o.op.Extensions["x-queen-access"] != "public" {
			require.Nil(t, o.op.Security, "%s: only public operations override the global security", o.op.OperationID)
			continue
		}
		require.NotNil(t, o.op.Security, "%s is public: it must say `security: []`", o.op.OperationID)
		anonymous := len(*o.op.Security) == 0 || slices.ContainsFunc(*o.op.Security, func(r openapi3.SecurityRequirement) bool { return len(r) == 0 })
		require.True(t, anonymous, "%s is public but its security needs a token", o.op.OperationID)
	}
}

// Every request body and every answer with a body has a schema, and no
// schema reachable from an operation is shapeless where the shape is known:
// an object lists its properties (or says what its values are), an array
// its items. Untyped schemas are the ones that are any JSON on purpose (a
// payload, or a field the broker accepts and ignores), and they say so.
func TestSpecSchemasAreTyped(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	seen := map[*openapi3.Schema]bool{}
	for _, o := range operations(doc) {
		if rb := o.op.RequestBody; rb != nil {
			require.NotEmpty(t, rb.Value.Content, "%s request body", o.op.OperationID)
			for ct, mt := range rb.Value.Content {
				require.NotNil(t, mt.Schema, "%s request %s", o.op.OperationID, ct)
				checkSchema(t, o.op.OperationID+" request", mt.Schema, seen)
			}
		}
		for code, resp := range o.op.Responses.Map() {
			where := o.op.OperationID + " " + code
			if code == "204" || code == "303" {
				require.Empty(t, resp.Value.Content, "%s has no body", where)
				continue
			}
			require.NotEmpty(t, resp.Value.Content, where)
			for ct, mt := range resp.Value.Content {
				require.NotNil(t, mt.Schema, "%s %s", where, ct)
				checkSchema(t, where, mt.Schema, seen)
			}
		}
	}
}

func checkSchema(t *testing.T, where string, ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	t.Helper()
	s := ref.Value
	if seen[s] {
		return
	}
	seen[s] = true
	if ref.Ref != "" {
		where = ref.Ref
	}
	composed := len(s.AllOf) + len(s.OneOf) + len(s.AnyOf)
	if s.Type == nil && composed == 0 {
		_, raw := s.Extensions["x-go-type"]
		purposeful := raw || strings.Contains(s.Description, "ignored")
		require.True(t, purposeful, "%s: a schema without a type must be any JSON on purpose (x-go-type) or ignored, and say so", where)
	}
	if s.Type.Is(openapi3.TypeObject) {
		hasShape := len(s.Properties) > 0 || composed > 0 || s.AdditionalProperties.Schema != nil ||
			(s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has)
		require.True(t, hasShape, "%s: an object without properties", where)
	}
	if s.Type.Is(openapi3.TypeArray) {
		require.NotNil(t, s.Items, "%s: an array without items", where)
	}
	for name, p := range s.Properties {
		checkSchema(t, where+"."+name, p, seen)
	}
	if s.Items != nil {
		checkSchema(t, where+"[]", s.Items, seen)
	}
	if s.AdditionalProperties.Schema != nil {
		checkSchema(t, where+"{}", s.AdditionalProperties.Schema, seen)
	}
	for _, list := range [][]*openapi3.SchemaRef{s.AllOf, s.OneOf, s.AnyOf} {
		for _, c := range list {
			checkSchema(t, where, c, seen)
		}
	}
}

// The main routes carry examples of their request and of their answer,
// which generators put in the clients' docs (and TestSpecValidates checks
// against the schemas).
func TestSpecExamplesOnMainRoutes(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	main := map[string]int{
		"pushMessages": http.StatusCreated, "popQueue": http.StatusOK, "popPartition": http.StatusOK,
		"ackMessage": http.StatusOK, "ackBatch": http.StatusOK, "executeTransaction": http.StatusOK,
		"configureQueue": http.StatusOK, "extendLease": http.StatusOK, "listDeadLetters": http.StatusOK,
	}
	found := 0
	for _, o := range operations(doc) {
		status, ok := main[o.op.OperationID]
		if !ok {
			continue
		}
		found++
		if rb := o.op.RequestBody; rb != nil {
			require.NotEmpty(t, rb.Value.Content.Get("application/json").Examples, "%s request", o.op.OperationID)
		}
		resp := o.op.Responses.Status(status)
		require.NotNil(t, resp, "%s %d", o.op.OperationID, status)
		require.NotEmpty(t, resp.Value.Content.Get("application/json").Examples, "%s %d", o.op.OperationID, status)
	}
	require.Equal(t, len(main), found)
}
