//go:build !exporter_only

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// mdLink is an inline Markdown link or image: [text](target) with an optional title.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode is a code span: a link written inside one is an example, not a link.
var inlineCode = regexp.MustCompile("`[^`]*`")

// TestMarkdownLinksResolve follows every relative link of every Markdown file of the
// repository: the README sends readers to the components' documents, so a moved section or a
// renamed heading must not leave a link that leads nowhere. A link names a file or folder
// that exists, and its #anchor (or a bare #anchor in the same file) one of the target's
// headings, as GitHub derives anchors from them.
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, l := range markdownLinks(string(b)) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if !strings.HasPrefix(dest, root) {
					t.Errorf("%s:%d: link %q leaves the repository", rel, l.line, target)
					continue
				}
				st, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: no such file or folder", rel, l.line, target)
					continue
				}
				if st.IsDir() || !strings.HasSuffix(dest, ".md") {
					if anchor != "" {
						t.Errorf("%s:%d: link %q: an anchor into something that is not Markdown", rel, l.line, target)
					}
					continue
				}
			}
			if anchor != "" && !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel, l.line, target, filepath.Base(dest), anchor)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("found %d Markdown files under %s: the walk is looking in the wrong place", files, root)
	}
}

type link struct {
	target string
	line   int
}

// markdownLinks returns the inline links of a Markdown text outside fenced code blocks and
// code spans.
func markdownLinks(text string) []link {
	var links []link
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = inlineCode.ReplaceAllString(line, "")
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			links = append(links, link{target: m[1], line: i + 1})
		}
	}
	return links
}

// headingAnchors returns the anchors GitHub gives a Markdown text's headings: the heading in
// lower case, without punctuation other than '-' and '_', spaces as '-'; a repeated one gets
// -1, -2, …. Explicit <a name="…"> and id="…" anchors count too.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if len(h) == len(line) || len(line)-len(h) > 6 || (h != "" && h[0] != ' ') {
			continue
		}
		a := slug(strings.TrimSpace(h))
		if n := count[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		count[a]++
	}
	return anchors
}

var htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestHeadingAnchors pins the anchor rule the link check relies on.
func TestHeadingAnchors(t *testing.T) {
	for _, c := range []struct{ text, anchor string }{
		{"## Fleet hours: `fleet_hours`, `fleet_hour_gpus` (migration 0049)", "fleet-hours-fleet_hours-fleet_hour_gpus-migration-0049"},
		{"# slicemeter — design", "slicemeter--design"},
		{"### A sample", "a-sample"},
		{"## Production in a few steps", "production-in-a-few-steps"},
		{"## x\n## x", "x-1"},
		{"```\n## not a heading\n```", ""},
	} {
		got := headingAnchors(c.text)
		if c.anchor == "" {
			if len(got) != 0 {
				t.Errorf("%q: anchors %v, want none", c.text, got)
			}
			continue
		}
		if !got[c.anchor] {
			t.Errorf("%q: anchors %v, want %q", c.text, got, c.anchor)
		}
	}
}

// TestREADMEIsAFrontDoor holds the top-level README to what a newcomer reads in one sitting
// (about 400 lines): the reference lives in the components' READMEs and docs/, measured figures
// in docs/benchmarks.md.
func TestREADMEIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 400 {
		t.Errorf("README.md has %d lines, more than 400: move reference material to the components' READMEs or docs/", n)
	}
}
