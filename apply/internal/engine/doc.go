// Package engine holds the pure decisions of the applier (package apply),
// those that need neither the target nor the catalog: Machine checks the
// framing of the decoded message stream and says what each message means
// (an Event); AlreadyApplied is the one rule that recognises a source
// transaction applied before a restart; Outcome is what a step of the
// applier did to transactions, for the run loop's FlushTracker, with the
// rule by which a two-phase step folds its end into it (Outcome.FoldApplied);
// OriginTracker tells, from the events, which origin the last transaction
// came from (the run loop's Progress.LastOrigin); CopyFilter drops the
// changes a table's initial copy, made in a later snapshot, already holds;
// Group decides where a group of source transactions sharing one target
// transaction ends.
//
// It is the start of issue 19's engine: the applier itself (package apply's
// applier type) is to follow, talking to the target through its small
// interface and to the catalog through relmap.Catalog (see apply/doc.go).
package engine
