// Package openapi holds the broker's one spec, openapi.yaml, and the commands that generate
// code from it: gen/api (oapi-codegen: models, the strict server and the embedded spec),
// gen/client (oapi-codegen: the Go client SDK, see sdk/queen) and gen/routes (routegen: the
// route → access-level table). `go generate ./openapi` runs them from the repository root, in
// this order; `make generate` also regenerates the TypeScript SDK's types.
package openapi

//go:generate sh -c "cd .. && go tool oapi-codegen -config openapi/oapi-codegen.yaml openapi/openapi.yaml"
//go:generate sh -c "cd .. && go tool oapi-codegen -config openapi/oapi-codegen-client.yaml openapi/openapi.yaml"
//go:generate sh -c "cd .. && go run ./openapi/routegen"
