// Package schema is what walapply run --copy --schema knows of schemas
// apart from the copy: pg_dump (finding it, checking that it can read the
// source, running it for one section without the source's password on its
// command line, splitting its script into entries and running them) and the
// plan of what the pre-data section creates on the target, with every
// conflict that stands in its way, and the post-data section's builds:
// each table's own as soon as it is copied (EarlyBuilds), the rest after
// the copy (BuildPostData).
//
// walapply generates no DDL of its own: every object it creates is pg_dump's
// text. The copy (apply/schema.go) decides when each section runs, records
// the phase in walapply.copies and maps the errors here onto apply's
// (PermanentError, ErrConfig, SchemaConflictError); this package holds no
// connection of its own and no state. It reads the catalogs through
// Querier, runs statements through Execer (a *pgx.Conn is both), opens the
// post-data section's connections through the Connect it is given and logs
// to the logger it is given. So the rules it holds (when an existing object
// is in the way, which failures of an entry are an object already there,
// how the post-data section is spread over connections, how a connection
// string reaches pg_dump) are tested without a server: the unit tests feed
// a model of each catalog and connection (fake_test.go). Which objects a
// table needs is the catalog queries' (sql.go), tested against real
// servers by apply's TestCopySchema*.
package schema
