package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/queenforgo/queen/gen/api"
)

// requestValidator checks every request against openapi.yaml before the
// generated decoder sees it, so malformed input answers 400 with the field
// that is wrong and nothing reaches the database.
type requestValidator struct {
	doc *openapi3.T
	// byPattern maps the mux pattern ("POST /api/v1/push") to the route.
	byPattern map[string]*routers.Route
}

func newRequestValidator() (*requestValidator, error) {
	doc, err := api.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	doc.Servers = nil
	v := &requestValidator{doc: doc, byPattern: map[string]*routers.Route{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			v.byPattern[method+" "+path] = &routers.Route{
				Spec: doc, Path: path, PathItem: item, Method: method, Operation: op,
			}
		}
	}
	return v, nil
}

func (v *requestValidator) middleware(s *Server) api.MiddlewareFunc {
	opts := &openapi3filter.Options{
		AuthenticationFunc:  func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
		ExcludeResponseBody: true,
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route := v.byPattern[r.Pattern]
			if route == nil {
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
			if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
					return
				}
				writeError(w, http.StatusBadRequest, describeValidationError(err))
				return
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
