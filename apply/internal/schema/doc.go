// Package schema is what walapply run --copy --schema knows of schemas
// apart from the copy: pg_dump (finding it, checking that it can read the
// source, running it for one section without the source's password on its
// command line, splitting its script into entries and running them) and the
// plan of what the pre-data section creates on the target, with every
// conflict that stands in its way.
//
// walapply generates no DDL of its own: every object it creates is pg_dump's
// text. The copy (apply/schema.go) decides when each section runs, records
// the phase in walapply.copies and maps the errors here onto apply's
// (PermanentError, ErrConfig, SchemaConflictError); this package holds no
// connection of its own and no state. It reads the catalogs through Querier
// and runs statements through Execer (a *pgx.Conn is both), and logs to the
// logger it is given, so that the rules it holds (which objects a table
// needs, when an existing one is in the way, how a connection string
// reaches pg_dump) are tested without a server where they are pure.
package schema
