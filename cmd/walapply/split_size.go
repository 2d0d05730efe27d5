package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseSize reads a size flag (--copy-split-size, --index-memory): bytes,
// or a number with kB, MB, GB or TB (powers of 1024, as PostgreSQL's
// memory settings); "0" or "off" give -1 (never split; the target's own
// setting), "auto" gives 0 (the default: for --copy-split-size 256MB with
// --schema, else 1GB; --index-memory refuses it).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "auto" {
		return 0, nil
	}
	if s == "off" || s == "0" {
		return -1, nil
	}
	mult := int64(1)
	for i, u := range []string{"kB", "MB", "GB", "TB"} {
		if n, ok := strings.CutSuffix(s, u); ok {
			s, mult = strings.TrimSpace(n), int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with kB, MB, GB or TB)", s)
	}
	if n == 0 {
		return -1, nil
	}
	return n * mult, nil
}
