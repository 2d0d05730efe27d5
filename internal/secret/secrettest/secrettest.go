// Package secrettest holds the awkward passwords and connection string
// forms the tests of walapply's password masking (package secret) run
// through every command and library entry point, and the check they apply
// to what was printed.
package secrettest

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/walapply/walapply/internal/secret"
)

// Passwords have the characters connection strings treat specially: '@'
// and '/' and ':' (URL userinfo), '%' (escapes, also valid-looking ones),
// quotes, backslashes, spaces and '=' (key/value strings).
var Passwords = []string{
	`pw@/Se%cr3t x'Tail9Zz`,
	`a%40b`,
	`p:w@rd`,
	`back\slash`,
	`quo'te`,
	`sp ace`,
	`eq=ual`,
	`%41%42%zzEnc0ded`,
	`Zx9s3cr3tQ 'q\u@:/?&%=`,
}

// Form writes a connection string for user on host:port, database db, with
// a password, one way a user may write it.
type Form struct {
	Name string
	Make func(host, port, user, db, password string) string
}

// Forms are the ways a connection string may carry a password: URLs with
// it percent-encoded, raw (as typed without thinking of escapes) and as a
// query parameter; key/value strings with it quoted and escaped the libpq
// way, and raw.
var Forms = []Form{
	{"url", func(host, port, user, db, pw string) string {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, pw), Host: host + ":" + port, Path: "/" + db, RawQuery: "sslmode=disable"}
		return u.String()
	}},
	{"url-raw", func(host, port, user, db, pw string) string {
		return fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", user, pw, host, port, db)
	}},
	{"url-query", func(host, port, user, db, pw string) string {
		return fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable&password=%s", user, host, port, db, url.QueryEscape(pw))
	}},
	{"key-value", func(host, port, user, db, pw string) string {
		q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw)
		return fmt.Sprintf("host=%s port=%s user=%s dbname=%s password='%s' sslmode=disable", host, port, user, db, q)
	}},
	{"key-value-raw", func(host, port, user, db, pw string) string {
		return fmt.Sprintf("host=%s port=%s password=%s user=%s dbname=%s sslmode=disable", host, port, pw, user, db)
	}},
}

// Leak returns a piece of password, at least secret.Window bytes long,
// that text shows as written or percent-encoded; "" when there is none.
func Leak(text, password string) string {
	for _, p := range []string{password, url.QueryEscape(password), url.PathEscape(password),
		strings.TrimPrefix(url.UserPassword("", password).String(), ":")} {
		for i := 0; i+secret.Window <= len(p); i++ {
			if piece := p[i : i+secret.Window]; strings.Contains(text, piece) {
				return piece
			}
		}
	}
	return ""
}

// Context returns the text around the first occurrence of piece in text,
// for a failure message.
func Context(text, piece string) string {
	i := strings.Index(text, piece)
	if i < 0 {
		return ""
	}
	return text[max(0, i-150):min(len(text), i+len(piece)+80)]
}
