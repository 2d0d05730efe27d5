package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// usageError is a mistake on the command line or in a WALAPPLY_*
// variable: main prints it with a pointer to -h and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// helpRequest is -h or --help: main prints text on stdout and exits 0. It
// wraps flag.ErrHelp for callers that test for that.
type helpRequest struct{ text string }

func (e *helpRequest) Error() string { return "help requested" }
func (e *helpRequest) Unwrap() error { return flag.ErrHelp }

// newFlagSet returns a FlagSet for a command whose flags all have an
// environment fallback: flag "spill-dir" reads WALAPPLY_SPILL_DIR. Its
// usage is the command's summary and an aligned table of its flags; a
// command with more to say sets fs.Usage and calls writeFlags.
//
// The command line's conventions, one set for every command:
//
//   - -h or --help prints the command's usage on stdout and exits 0.
//   - A flag the command does not have, a value that does not parse and a
//     required flag left out are usage errors: one line on stderr naming
//     every problem at once (all missing required flags together), then a
//     pointer to -h, and exit status 2.
//   - Every flag falls back to an environment variable WALAPPLY_<FLAG>
//     (envName); a flag given on the command line wins. A variable whose
//     value does not parse says which one and what type it wants.
//   - Any other failure exits 1.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("walapply "+name, flag.ContinueOnError)
	if printed != nil {
		fs.SetOutput(printed.Writer(os.Stderr))
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: walapply %s [flags]\n\n", name)
		if s := commands[name].summary; s != "" {
			fmt.Fprintf(fs.Output(), "%s.\n\n", strings.ToUpper(s[:1])+s[1:])
		}
		writeFlags(fs.Output(), fs)
	}
	return fs
}

// parseWithEnv parses args, then applies environment defaults to every
// flag that the command line does not set, then checks that each of the
// required flags has a value (not blank). Every problem is a usageError
// (all missing required flags in one), -h a helpRequest.
func parseWithEnv(fs *flag.FlagSet, args []string, required ...string) error {
	typeFlags(fs, required)
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf) // the usage goes to stdout on -h, nowhere on an error
	err := fs.Parse(args)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		return &helpRequest{text: buf.String()}
	}
	if err != nil {
		return &usageError{msg: err.Error() + suggestFlag(fs, err)}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q (flags come as --name value or --name=value)", fs.Arg(0))}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var problems []string
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				problems = append(problems, fmt.Sprintf("%s=%q: %v", env, v, e))
			}
		}
	})
	var missing []string
	for _, name := range required {
		if f := fs.Lookup(name); f != nil && strings.TrimSpace(f.Value.String()) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, missingText(missing))
	}
	if len(problems) > 0 {
		return &usageError{msg: strings.Join(problems, "; ")}
	}
	return nil
}

// missingText names missing required flags and their variables:
// "--source, --slot and --publication are required (or set
// WALAPPLY_SOURCE, WALAPPLY_SLOT and WALAPPLY_PUBLICATION)".
func missingText(names []string) string {
	flags, envs := make([]string, len(names)), make([]string, len(names))
	for i, n := range names {
		flags[i], envs[i] = "--"+n, envName(n)
	}
	verb := "is"
	if len(names) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("%s %s required (or set %s)", andList(flags), verb, andList(envs))
}

func andList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return "WALAPPLY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// typedValue is a flag's value that knows its type: a value that does not
// parse says what it wants ("want an integer") instead of the standard
// library's "parse error".
type typedValue struct {
	flag.Value
	typ      string // as the usage shows it: "int", "duration", "" for bool
	want     string
	required bool
}

func (v *typedValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return errors.New("want " + v.want)
	}
	return nil
}

// IsBoolFlag keeps --flag without a value working for bool flags.
func (v *typedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// typeFlags wraps every flag's value in a typedValue (once).
func typeFlags(fs *flag.FlagSet, required []string) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*typedValue); done {
			return
		}
		typ, _ := flag.UnquoteUsage(f)
		want := "a valid value"
		switch fmt.Sprintf("%T", f.Value) {
		case "*flag.intValue", "*flag.int64Value":
			want = "an integer"
		case "*flag.uintValue", "*flag.uint64Value":
			want = "a non-negative integer"
		case "*flag.float64Value":
			want = "a number"
		case "*flag.durationValue":
			want = "a duration such as 500ms, 10s or 1m30s"
		case "*flag.boolValue":
			want = "true or false"
		}
		v := &typedValue{Value: f.Value, typ: typ, want: want}
		for _, r := range required {
			v.required = v.required || r == f.Name
		}
		f.Value = v
	})
}

// writeFlags prints fs's flags as an aligned table: name and type, then the
// description wrapped under itself, with the default and whether required.
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	type row struct{ left, text string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		required := false
		if v, ok := f.Value.(*typedValue); ok {
			typ, required = v.typ, v.required
		}
		left := "--" + f.Name
		if typ != "" {
			left += " " + typ
		}
		switch {
		case required:
			usage += " (required)"
		case f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s":
			usage += " (default " + f.DefValue + ")"
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	})
	width = min(width, 30)
	fmt.Fprintf(w, "flags (each can also be set with the environment variable WALAPPLY_<FLAG>, upper case,\ndashes as underscores; the command line wins):\n")
	for _, r := range rows {
		pad := width - len(r.left)
		if pad < 0 {
			fmt.Fprintf(w, "  %s\n%s", r.left, strings.Repeat(" ", width+2))
			pad = 0
		}
		fmt.Fprintf(w, "  %s%s  %s\n", r.left, strings.Repeat(" ", pad), wrapText(r.text, 100-width-4, strings.Repeat(" ", width+4)))
	}
}

// wrapText breaks s into lines of at most n bytes at spaces, starting each
// continuation line with indent.
func wrapText(s string, n int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if line+1+len(word) > n {
				b.WriteString("\n" + indent)
				line = 0
			} else {
				b.WriteByte(' ')
				line++
			}
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}

// suggestFlag names the closest flag to an undefined one: "; did you mean
// --source?" for -sorce (at most two letters off), else "".
func suggestFlag(fs *flag.FlagSet, err error) string {
	const prefix = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return ""
	}
	given := strings.TrimPrefix(msg[len(prefix):], "-")
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(given, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return "; did you mean --" + best + "?"
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
