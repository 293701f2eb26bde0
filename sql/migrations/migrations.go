// Package migrations embeds the numbered schema migrations, NNNN_name.up.sql.
// The same folder is sqlc's schema input; sql/migrate applies them.
package migrations

import "embed"

// FS holds every migration file at its root.
//
//go:embed *.sql
var FS embed.FS
