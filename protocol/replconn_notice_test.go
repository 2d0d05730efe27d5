package protocol

import (
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestSkippedPublication: which notices end the stream. The real warning
// of PostgreSQL 18 is checked end to end in apply's
// TestPublicationDroppedWhileRunning.
func TestSkippedPublication(t *testing.T) {
	requested := []string{"pub", "Other pub"}
	cases := []struct {
		name   string
		notice pgproto3.NoticeResponse
		ends   bool
		named  []string
	}{
		{"the warning", pgproto3.NoticeResponse{SeverityUnlocalized: "WARNING", Code: "55000", Message: `skipped loading publication "Other pub"`,
			Detail: "The publication does not exist at this point in the WAL."}, true, []string{"Other pub"}},
		{"translated, localized severity", pgproto3.NoticeResponse{Severity: "WARNUNG", SeverityUnlocalized: "WARNING", Code: "55000", Message: `Publikation »pub« übersprungen`}, true, []string{"pub"}},
		{"naming none of ours", pgproto3.NoticeResponse{SeverityUnlocalized: "WARNING", Code: "55000", Message: "something else"}, true, nil},
		{"a notice", pgproto3.NoticeResponse{SeverityUnlocalized: "NOTICE", Code: "55000", Message: `skipped loading publication "pub"`}, false, nil},
		{"another warning", pgproto3.NoticeResponse{SeverityUnlocalized: "WARNING", Code: "01000", Message: "pub"}, false, nil},
	}
	for _, c := range cases {
		err := skippedPublication(&c.notice, requested)
		var e *PublicationSkippedError
		if got := errors.As(err, &e); got != c.ends {
			t.Errorf("%s: ends the stream %v (%v), want %v", c.name, got, err, c.ends)
			continue
		}
		if c.ends && !slices.Equal(e.Publications, c.named) {
			t.Errorf("%s: names %q, want %q", c.name, e.Publications, c.named)
		}
	}
}
