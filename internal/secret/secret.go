// Package secret keeps passwords out of everything walapply prints: errors,
// log lines, the command's last words. It has one rule, used wherever a
// connection string or an error about one can reach output:
//
// Every run of at least Window bytes that is part of a password is
// replaced by Mask, and so is a whole password shorter than that (from 3
// bytes on). "Part of a password" counts every spelling the password may
// have in a message: as written, URL percent-encoded or decoded, key/value
// quoted and escaped or not, JSON-escaped (zerolog's lines).
//
// What the password is cannot always be known. A malformed string does not
// parse, and pgconn masks only what it recognises (a URL's userinfo up to
// its first '@'); a raw '@' or '/' in a URL's password moves the split
// between userinfo and host, so parts of the password end up in the host
// or the database name, which connection errors print. The passwords of a
// connection string are therefore read generously: pgconn's own reading
// (which also resolves PGPASSWORD and the passfile), every reading of a
// URL's userinfo up to each '@', and every reading of a password=
// (or sslpassword=) setting. Masking a few bytes too many is the price.
package secret

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// Mask replaces what is masked; it is pgconn's own.
const Mask = "xxxxx"

// Window is the shortest part of a password that is masked wherever it
// appears.
const Window = 4

// minWhole is the shortest password masked as a whole.
const minWhole = 3

// Set is the passwords of some connection strings, ready to be masked.
// The zero Set and a nil *Set mask nothing.
type Set struct {
	windows map[string]struct{} // every Window-byte piece of every spelling
	whole   []string            // spellings shorter than Window
	// starts has a bit for the first two bytes of every window: most
	// bytes of a message are passed over without a map lookup.
	starts [1 << 16 / 64]uint64
}

// New returns the passwords connStrings may hold, with PGPASSWORD's.
func New(connStrings ...string) *Set {
	s := &Set{windows: map[string]struct{}{}}
	for _, p := range passwords(connStrings) {
		for _, v := range spellings(p) {
			if len(v) < Window {
				if len(v) >= minWhole {
					s.whole = append(s.whole, v)
				}
				continue
			}
			for i := 0; i+Window <= len(v); i++ {
				s.windows[v[i:i+Window]] = struct{}{}
				k := pair(v, i)
				s.starts[k/64] |= 1 << (k % 64)
			}
		}
	}
	return s
}

// Scrub returns msg with the passwords of connStrings masked.
func Scrub(msg string, connStrings ...string) string { return New(connStrings...).Scrub(msg) }

// Error returns err with the passwords of connStrings masked in its
// message (nil for nil). errors.Is and errors.As still see err's chain,
// except when it holds a *pgconn.ParseConfigError: that keeps the string
// unmasked, so the chain is dropped.
func Error(err error, connStrings ...string) error { return New(connStrings...).Error(err) }

// Scrub returns msg with the set's passwords masked.
func (s *Set) Scrub(msg string) string {
	if s == nil || len(msg) == 0 || len(s.windows) == 0 && len(s.whole) == 0 {
		return msg
	}
	var covered []bool
	for i := 0; i+Window <= len(msg); i++ {
		if k := pair(msg, i); s.starts[k/64]&(1<<(k%64)) == 0 {
			continue
		}
		if _, ok := s.windows[msg[i:i+Window]]; ok {
			if covered == nil {
				covered = make([]bool, len(msg))
			}
			for j := i; j < i+Window; j++ {
				covered[j] = true
			}
		}
	}
	if covered == nil && len(s.whole) == 0 {
		return msg
	}
	out := msg
	if covered != nil {
		// A piece that begins or ends inside a character takes all of it.
		for i := range covered {
			if covered[i] {
				for k := i; k > 0 && !utf8.RuneStart(msg[k]); k-- {
					covered[k-1] = true
				}
				for k := i + 1; k < len(msg) && !utf8.RuneStart(msg[k]); k++ {
					covered[k] = true
				}
			}
		}
		var b strings.Builder
		for i := 0; i < len(msg); i++ {
			switch {
			case !covered[i]:
				b.WriteByte(msg[i])
			case i == 0 || !covered[i-1]:
				b.WriteString(Mask)
			}
		}
		out = b.String()
	}
	for _, w := range s.whole {
		out = strings.ReplaceAll(out, w, Mask)
	}
	for strings.Contains(out, Mask+Mask) {
		out = strings.ReplaceAll(out, Mask+Mask, Mask)
	}
	return out
}

// pair is the two bytes of s at i, as a number.
func pair(s string, i int) uint32 { return uint32(s[i])<<8 | uint32(s[i+1]) }

// Error is the package's Error with the set's passwords.
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := s.Scrub(err.Error())
	if pe := (*pgconn.ParseConfigError)(nil); errors.As(err, &pe) {
		return errors.New(msg)
	}
	return &scrubbed{msg: msg, err: err}
}

// Writer returns a writer that masks the set's passwords in what it
// writes to w. Each write is masked on its own, so a line must come in one
// write (zerolog writes a line at a time).
func (s *Set) Writer(w io.Writer) io.Writer { return &writer{s: s, w: w} }

type writer struct {
	s *Set
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.s.Scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// scrubbed is an error whose message is masked; the cause stays for
// errors.Is and errors.As.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// passwords returns every reading of a password in connStrings, and
// PGPASSWORD.
func passwords(connStrings []string) []string {
	out := []string{os.Getenv("PGPASSWORD")}
	for _, cs := range connStrings {
		if !strings.Contains(cs, "=") && !strings.Contains(cs, "://") {
			continue // not a connection string: a flag, a name
		}
		if cfg, err := pgconn.ParseConfig(cs); err == nil {
			out = append(out, cfg.Password)
		}
		out = append(out, userinfoPasswords(cs)...)
		out = append(out, settingPasswords(cs)...)
	}
	return out
}

// userinfoPasswords reads a URL's password as what lies between the
// userinfo's first ':' and each '@' after it: a raw '@' may be part of the
// password, and a raw '/' or '?' in it hides the real end from URL
// parsers.
func userinfoPasswords(cs string) []string {
	i := strings.Index(cs, "://")
	if i < 0 {
		return nil
	}
	rest := cs[i+3:]
	colon, at := strings.IndexByte(rest, ':'), strings.IndexByte(rest, '@')
	if colon < 0 || at < colon {
		return nil // no password in the userinfo
	}
	var out []string
	for k := colon + 1; k < len(rest); k++ {
		if rest[k] == '@' {
			out = append(out, rest[colon+1:k])
		}
	}
	return out
}

// settingPasswords reads every password= and sslpassword= value of a
// key/value string or URL query, in each way it may end: libpq's (a quote,
// or an unescaped space), a URL query's ('&'), and a careless writer's
// (unquoted, with spaces, up to the next key=value pair).
func settingPasswords(cs string) []string {
	var out []string
	lower := strings.ToLower(cs)
	for off := 0; ; {
		i := strings.Index(lower[off:], "password")
		if i < 0 {
			return out
		}
		j := off + i + len("password")
		off = j
		j = skipSpaces(cs, j)
		if j >= len(cs) || cs[j] != '=' {
			continue
		}
		j = skipSpaces(cs, j+1)
		if j < len(cs) && cs[j] == '\'' {
			raw, value := unquote(cs[j+1:])
			out = append(out, raw, value)
			continue
		}
		raw, value := unquoted(cs[j:])
		out = append(out, raw, value)
		if k := strings.IndexAny(cs[j:], "& \t\n"); k >= 0 {
			out = append(out, cs[j:j+k])
		}
		out = append(out, strings.TrimSpace(cs[j:nextSetting(cs, j)]))
	}
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// unquote reads a quoted key/value value after its opening quote, up to
// the closing quote or the end: as written and with libpq's backslash
// escapes resolved.
func unquote(s string) (raw, value string) {
	var b strings.Builder
	k := 0
	for ; k < len(s) && s[k] != '\''; k++ {
		if s[k] == '\\' && k+1 < len(s) {
			k++
		}
		b.WriteByte(s[k])
	}
	return s[:k], b.String()
}

// unquoted reads an unquoted key/value value, up to an unescaped space:
// as written and with backslash escapes resolved.
func unquoted(s string) (raw, value string) {
	var b strings.Builder
	k := 0
	for ; k < len(s) && !strings.ContainsRune(" \t\n\r", rune(s[k])); k++ {
		if s[k] == '\\' && k+1 < len(s) {
			k++
		}
		b.WriteByte(s[k])
	}
	return s[:k], b.String()
}

// nextSetting returns where the next setting ("key=" or "key =", the key
// a word of letters, digits and underscores) after position from starts,
// or the end of s.
func nextSetting(s string, from int) int {
	for k := from; k < len(s); k++ {
		if s[k] != ' ' && s[k] != '\t' {
			continue
		}
		w := skipSpaces(s, k)
		end := w
		for end < len(s) && (s[end] == '_' || 'a' <= s[end]|0x20 && s[end]|0x20 <= 'z' || w < end && '0' <= s[end] && s[end] <= '9') {
			end++
		}
		if end > w {
			if e := skipSpaces(s, end); e < len(s) && s[e] == '=' {
				return k
			}
		}
	}
	return len(s)
}

// spellings returns p in every form a message may show it in.
func spellings(p string) []string {
	if p == "" {
		return nil
	}
	bases := []string{p}
	if d, err := url.PathUnescape(p); err == nil && d != p {
		bases = append(bases, d)
	}
	if d, err := url.QueryUnescape(p); err == nil && d != p {
		bases = append(bases, d)
	}
	kv := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	var out []string
	for _, b := range bases {
		j, _ := json.Marshal(b)
		out = append(out, b, url.QueryEscape(b), url.PathEscape(b),
			strings.TrimPrefix(url.UserPassword("", b).String(), ":"),
			kv.Replace(b), string(j[1:len(j)-1]))
	}
	return out
}
