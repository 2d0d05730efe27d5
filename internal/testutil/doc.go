// Package testutil holds the helpers that the tests of several packages
// share and that are not about clusters (those are in testenv): a log
// sink the test reads back (LogBuffer) and a child process of the test
// (Process). It is imported by test files only.
package testutil
