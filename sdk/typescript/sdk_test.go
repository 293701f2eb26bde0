// Package typescript_test runs the TypeScript SDK's node tests
// (sdk/typescript/test) against a real broker, so that `go test ./...` and
// `make test` exercise the TypeScript SDK too. `make test` installs its
// packages first (npm ci from the committed package-lock.json).
package typescript_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/queenforgo/queen/sdk/brokertest"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestTypeScriptSDK(t *testing.T) {
	if _, err := os.Stat("node_modules/.package-lock.json"); err != nil {
		t.Fatal("sdk/typescript/node_modules is missing: `make test` installs it, or run `npm ci` in sdk/typescript")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (the TypeScript SDK needs Node.js 20 or newer)")
	}
	// Compile first: a type error between the SDK and the generated
	// schema fails here, before any request.
	if out, err := exec.Command(node, "node_modules/typescript/bin/tsc", "-p", ".").CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	b := brokertest.Start(t, pgtest.NewDB(t))
	cmd := exec.Command(node, "--test", "dist/test/")
	cmd.Env = append(os.Environ(), "QUEEN_URL="+b.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}
