// Package initcopy is the initial copy's work (walapply run --copy, and
// the copy of tables published later): which tables the publications
// publish and with which columns and row filters (ListPublished), whether
// the target is ready for them (CheckTarget), what a start does about an
// unfinished copy (Decide, a pure decision from Facts), and the copy
// itself (Copier.CopyTables): the tables and the ranges of big ones
// (ranges.go, split.go) shared out to workers, each importing the
// exported snapshot on a source connection of its own and piping COPY TO
// into COPY FROM on a target connection (pipe.go), in binary where the
// column types allow (format.go), with COPY FREEZE where the table was
// just created (whole.go, freeze.go), each table's or range's rows
// committed with its row in walapply.copy_state or walapply.copy_ranges
// (copystate.go), the workers' replication origins (origins.go) and the
// progress counted as rows stream (progress.go).
//
// apply decides when a copy runs and around it holds what is the
// applier's: the slot and its exported snapshot, --schema's sections,
// the origin set to the slot's consistent point, walapply.copies, the
// public CopyProgress and CopyCheckError (apply/copy.go, refresh*.go,
// schema.go). The package knows none of apply's types: it opens
// connections through the functions it is given, and makes its errors
// apply's kinds through Copier.NotEmpty and Copier.Refused, or returns
// values (Problems, *PublicationsMissingError, Decide's refusals) that
// apply turns into them at the boundary. The pure rules (Decide, the
// SQL of a table and a range, the split of a key span, whole or ranges,
// the binary rule, origin names, the pipe, the progress) are tested here
// without a server; the pipe's moves and everything else against real
// servers, here and by apply's TestCopy* tests through Run.
package initcopy
