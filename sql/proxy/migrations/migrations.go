// Package migrations embeds the proxy's numbered schema migrations
// (schema queen_proxy, "pxdb"), NNNN_name.up.sql. The same folder is sqlc's
// schema input for gen/pxdb; the proxy applies them at boot through
// sql/migrate under its own advisory lock.
package migrations

import "embed"

// FS holds every migration file at its root.
//
//go:embed *.sql
var FS embed.FS

// LockKey is the advisory lock held while these migrations run. It differs
// from the broker's, so a proxy and a broker sharing a database never wait
// on each other.
const LockKey int64 = 0x717565656e707879 // "queenpxy"

// Schema is the schema the migrations create and record their history in.
const Schema = "queen_proxy"
