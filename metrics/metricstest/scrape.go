// Package metricstest reads walapply's metrics endpoint in tests.
package metricstest

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Get returns the status and body of a GET; a failed request fails t.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Scrape GETs a Prometheus text page and returns its samples by series
// ("name" or "name{label=\"value\"}"). A status other than 200 or a
// malformed line fails t.
func Scrape(t testing.TB, url string) map[string]float64 {
	t.Helper()
	code, body := Get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("GET %s: malformed line %q", url, line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("GET %s: line %q: %v", url, line, err)
		}
		out[line[:i]] = v
	}
	return out
}
