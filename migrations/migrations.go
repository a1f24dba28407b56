// Package migrations holds refundd's SQL schema as goose migrations, embedded
// into the binary so `refundd migrate` needs nothing but a database.
package migrations

import "embed"

// FS holds the numbered migration files.
//
//go:embed *.sql
var FS embed.FS
