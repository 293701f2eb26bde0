package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// requestValidator checks every request against openapi.yaml before the
// generated decoder sees it, so malformed input answers 400 with the field
// that is wrong and nothing reaches the database.
type requestValidator struct {
	doc *openapi3.T
	// byPattern maps the mux pattern ("POST /api/v1/push") to the route.
	byPattern map[string]*routers.Route

	// The push body, the hottest input, is not run through the generic
	// validator (which decodes it into a tree a second time, payloads
	// included). The handler decodes it once into the typed struct and
	// checks each item's fields against these schemas, taken from the same
	// spec, so openapi.yaml stays the one description of the rules.
	pushMaxItems  int
	pushItemProps []pushItemProp
	// The batch ack likewise (ack_validate.go).
	ack ackSchemas

	// passed remembers the body-less requests that passed (passedCache).
	passed passedCache
}

type pushItemProp struct {
	name     string
	schema   *openapi3.Schema
	rule     *stringRule // the schema's quick yes; nil: none
	optional bool        // not in the spec's required list
}

// typedBodyOperations are validated by their handler after the typed decode
// instead of by the generic body validator. The names are operation ids as
// the embedded spec spells them: oapi-codegen capitalises them (the yaml's
// pushMessages is PushMessages there), and newRequestValidator refuses a name
// that matches no operation, so a rename cannot silently bring back the
// double decode.
var typedBodyOperations = map[string]bool{"PushMessages": true, "AckBatch": true}

// sharedValidator is the one validator of the process: the broker's HTTP
// chain and its spool replay (PushValidator) check against the same parsed
// spec. Each parse keeps about 1.7 MB alive for good, which the garbage
// collector's heap goal multiplies by 1 + GOGC/100 (docs/benchmarks.md,
// "What the peak was made of").
var sharedValidator = sync.OnceValues(newRequestValidator)

func newRequestValidator() (*requestValidator, error) {
	doc, err := loadSpec()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	doc.Servers = nil
	v := &requestValidator{doc: doc, byPattern: map[string]*routers.Route{}}
	if err := v.loadPushSchema(); err != nil {
		return nil, err
	}
	if err := v.loadAckSchema(); err != nil {
		return nil, err
	}
	typed := 0
	v.passed.headers = map[string][]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			v.byPattern[method+" "+path] = &routers.Route{
				Spec: doc, Path: path, PathItem: item, Method: method, Operation: withoutSecurity(op),
			}
			if headers, ok := bodylessInputs(item, op); ok {
				v.passed.headers[method+" "+path] = headers
			}
			if typedBodyOperations[op.OperationID] {
				typed++
			}
		}
	}
	if typed != len(typedBodyOperations) {
		return nil, fmt.Errorf("spec: typedBodyOperations names an operation id the spec does not have: %v", typedBodyOperations)
	}
	return v, nil
}

// withoutSecurity is op as the validator sees it: with no security
// requirement. Authentication is the auth middleware's (outside the
// validator) and withAuthorization's, so the validator's own check could
// only pass; but kin-openapi's check reads the whole request body into a
// second buffer and swaps it in (for an authentication function that might
// read it), on every push and batch ack before its handler reads it again
// (docs/benchmarks.md, "Round 4: pop and ack"). An empty list is what it
// skips; a body too large is still refused with 413 by the body's reader,
// here or in the handler.
func withoutSecurity(op *openapi3.Operation) *openapi3.Operation {
	c := *op
	c.Security = &openapi3.SecurityRequirements{}
	return &c
}

// loadSpec parses the embedded spec as the JSON it is. The generated
// api.GetSpec gives the same document, but its loader reads JSON with its
// YAML parser first: 29 MB allocated per parse, against 12 MB this way,
// and the boot's garbage is part of the broker's peak RSS (VmHWM).
// TestLoadSpecMatchesGenerated holds the two equal.
func loadSpec() (*openapi3.T, error) {
	raw, err := api.GetSpecJSON()
	if err != nil {
		return nil, err
	}
	doc := &openapi3.T{}
	if err := doc.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if err := openapi3.NewLoader().ResolveRefsIn(doc, nil); err != nil {
		return nil, err
	}
	return doc, nil
}

func (v *requestValidator) loadPushSchema() error {
	req := v.doc.Components.Schemas["PushRequest"]
	item := v.doc.Components.Schemas["PushItem"]
	if req == nil || item == nil || req.Value.Properties["items"] == nil || req.Value.Properties["items"].Value.MaxItems == nil {
		return fmt.Errorf("spec: PushRequest.items with maxItems and PushItem are required")
	}
	v.pushMaxItems = int(*req.Value.Properties["items"].Value.MaxItems)
	// The order is checkPushItems' (its switch).
	for _, name := range []string{"queue", "partition", "transactionId", "traceId"} {
		p := item.Value.Properties[name]
		if p == nil {
			return fmt.Errorf("spec: PushItem.%s is missing", name)
		}
		optional := !slices.Contains(item.Value.Required, name)
		if optional && p.Value.VisitJSON("") != nil {
			// The broker takes an empty optional field for an absent one.
			return fmt.Errorf("spec: PushItem.%s is optional but refuses an empty string", name)
		}
		rule, ok := compileStringRule(p.Value)
		if !ok {
			rule = nil // every value goes to VisitJSON
		}
		v.pushItemProps = append(v.pushItemProps, pushItemProp{name, p.Value, rule, optional})
	}
	return nil
}

// checkPushItems applies the PushRequest rules to a decoded push: items
// present (nil: the body had none), at most maxItems of them, and each item's
// names and ids as the spec constrains them. An absent optional field is ""
// (loadPushSchema makes sure the spec accepts "" for each). The payload has no
// constraints and is never looked at.
func (v *requestValidator) checkPushItems(items []broker.PushItem) error {
	if items == nil {
		return invalidf(`invalid request body: property "items" is missing`)
	}
	if len(items) > v.pushMaxItems {
		return invalidf("invalid request body at items: at most %d items are allowed", v.pushMaxItems)
	}
	// The items of one push mostly share their queue and partition names:
	// a value equal to the last one that passed needs no second check (the
	// regular expression is most of a push's validation cost).
	var lastValid [4]string
	var checked [4]bool
	for i := range items {
		it := &items[i]
		for k := range v.pushItemProps {
			p := &v.pushItemProps[k]
			var val string
			switch k {
			case 0:
				val = it.Queue
			case 1:
				val = it.Partition
			case 2:
				val = it.TransactionID
			case 3:
				val = it.TraceID
			}
			if (val == "" && p.optional) || (checked[k] && lastValid[k] == val) {
				continue
			}
			if p.rule == nil || !p.rule.passes(val) {
				if err := p.schema.VisitJSON(val); err != nil {
					reason := err.Error()
					var schemaErr *openapi3.SchemaError
					if errors.As(err, &schemaErr) {
						reason = schemaErr.Reason
					}
					return invalidf("invalid request body at items/%d/%s: %s", i, p.name, reason)
				}
			}
			lastValid[k], checked[k] = val, true
		}
	}
	return nil
}

// PushValidator checks push items with the spec's rules, for the broker's
// replay of spooled records (broker.Config.ValidatePushFunc): a record from a
// hand-edited or foreign file must pass the same rules as a push.
func PushValidator() (func([]broker.PushItem) error, error) {
	v, err := sharedValidator()
	if err != nil {
		return nil, err
	}
	return func(items []broker.PushItem) error {
		if items == nil {
			items = []broker.PushItem{}
		}
		return v.checkPushItems(items)
	}, nil
}

func (v *requestValidator) middleware(s *Server) api.MiddlewareFunc {
	opts := &openapi3filter.Options{
		AuthenticationFunc:  func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
		ExcludeResponseBody: true,
	}
	typedOpts := *opts
	typedOpts.ExcludeRequestBody = true
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route := v.byPattern[r.Pattern]
			if route == nil {
				next.ServeHTTP(w, r)
				return
			}
			var keyBuf [256]byte
			key, cacheable := v.passed.key(keyBuf[:0], r)
			if cacheable && v.passed.has(key) {
				next.ServeHTTP(w, r)
				return
			}
			params := map[string]string{}
			for _, p := range route.Operation.Parameters {
				if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
					params[p.Value.Name] = r.PathValue(p.Value.Name)
				}
			}
			for _, p := range route.PathItem.Parameters {
				if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
					params[p.Value.Name] = r.PathValue(p.Value.Name)
				}
			}
			in := &openapi3filter.RequestValidationInput{
				Request: r, PathParams: params, Route: route, Options: opts,
			}
			if typedBodyOperations[route.Operation.OperationID] {
				in.Options = &typedOpts
			}
			if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
					return
				}
				writeError(w, http.StatusBadRequest, describeValidationError(err))
				return
			}
			if cacheable {
				v.passed.add(key)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// describeValidationError turns kin-openapi's error into one line that names
// the offending field, e.g. `items/0/queue: string doesn't match ...`.
func describeValidationError(err error) string {
	var reqErr *openapi3filter.RequestError
	if !errors.As(err, &reqErr) {
		return err.Error()
	}
	var schemaErr *openapi3.SchemaError
	hasSchemaErr := errors.As(reqErr.Err, &schemaErr)
	switch {
	case reqErr.Parameter != nil:
		reason := reqErr.Reason
		if hasSchemaErr {
			reason = schemaErr.Reason
		} else if reqErr.Err != nil {
			reason = strings.TrimSpace(reason + " " + reqErr.Err.Error())
		}
		return fmt.Sprintf("invalid %s parameter %q: %s", reqErr.Parameter.In, reqErr.Parameter.Name, reason)
	case reqErr.RequestBody != nil:
		if errors.Is(reqErr.Err, openapi3filter.ErrInvalidRequired) || strings.Contains(reqErr.Error(), "value is required but missing") {
			return "Empty request body"
		}
		if hasSchemaErr {
			path := strings.Join(schemaErr.JSONPointer(), "/")
			if path == "" {
				return "invalid request body: " + schemaErr.Reason
			}
			return fmt.Sprintf("invalid request body at %s: %s", path, schemaErr.Reason)
		}
		var parseErr *openapi3filter.ParseError
		if errors.As(reqErr.Err, &parseErr) {
			return "Invalid JSON: " + parseErr.Error()
		}
		if reqErr.Err != nil {
			return "invalid request body: " + reqErr.Err.Error()
		}
		return "invalid request body: " + reqErr.Reason
	}
	return reqErr.Error()
}
