package protocol

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// PublicationSkippedError ends a stream whose walsender skipped a
// publication.
//
// A walsender of PostgreSQL 18 that does not find a publication it was
// asked for only warns, `WARNING: skipped loading publication "x"`
// (SQLSTATE 55000, object_not_in_prerequisite_state), and sends nothing of
// what that publication would have sent, for every change up to the next
// time it loads the publications (PostgreSQL 15 to 17 end the stream with an
// error, 42704, instead). A client that carried on would confirm positions
// past changes it never received: gone for good. So the stream ends at such
// a warning, before any message after it is handed out.
//
// The warning is recognised by its severity and SQLSTATE, never by its text
// alone (lc_messages translates it); the publications it names are found by
// looking for the requested names in it. Another warning with that SQLSTATE
// on a replication stream is not expected; it ends the stream too, which
// stops rather than risks losing changes. Other notices are skipped.
type PublicationSkippedError struct {
	// Publications are the requested publications the warning names
	// (empty if it names none of them).
	Publications []string
	Message      string // the server's message
	Detail       string
}

func (e *PublicationSkippedError) Error() string {
	var b strings.Builder
	b.WriteString("protocol: the source skipped a publication and sends nothing for it: WARNING: ")
	b.WriteString(e.Message)
	if e.Detail != "" {
		fmt.Fprintf(&b, " (%s)", e.Detail)
	}
	return b.String()
}

// sqlstateObjectNotInPrerequisiteState is the SQLSTATE of the warning.
const sqlstateObjectNotInPrerequisiteState = "55000"

// skippedPublication returns the error a notice ends the stream with, or
// nil for a notice to skip.
func skippedPublication(n *pgproto3.NoticeResponse, requested []string) error {
	if n.SeverityUnlocalized != "WARNING" || n.Code != sqlstateObjectNotInPrerequisiteState {
		return nil
	}
	return &PublicationSkippedError{Publications: PublicationsNamed(n.Message, requested), Message: n.Message, Detail: n.Detail}
}

// PublicationsNamed returns those of the requested publications that a
// server message names: quoted "like this" where the message has them so
// (one name can be part of another), else anywhere in it (a translation
// may quote otherwise).
func PublicationsNamed(msg string, requested []string) []string {
	var quoted, anywhere []string
	for _, p := range requested {
		if strings.Contains(msg, `"`+p+`"`) {
			quoted = append(quoted, p)
		}
		if strings.Contains(msg, p) {
			anywhere = append(anywhere, p)
		}
	}
	if len(quoted) > 0 {
		return quoted
	}
	return anywhere
}
