package e2e

import (
	"encoding/csv"
	"os"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/schemas/scenario/expected"
)

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// parseCSV parses a report printed as CSV.
func parseCSV(t *testing.T, text string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		t.Fatalf("report CSV: %v\n%s", err, text)
	}
	return rows
}

// compareReports returns every difference between got and want beyond the scenario checks'
// tolerances.
func compareReports(got, want [][]string, interval float64) []string {
	return expected.Compare(got, want, interval)
}
