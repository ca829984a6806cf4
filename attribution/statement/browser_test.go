package statement

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/attribution/api/auth"
)

// needChromium skips under -short (it starts a browser: `make test-short` starts no other
// process) and without Chromium, except in CI (install-deps.sh installs it).
func needChromium(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not starting headless Chromium")
	}
	if _, err := Chromium(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skipf("skipped, no headless Chromium here: %s", InstallHint)
	}
}

// probe runs in the browser after the page (appended by the test only: the statement itself
// has no script) and leaves what the browser laid out in data-check: per chart the points it
// declares, holds and drew with a bar of some height, the totals as shown, and how many resources the
// page fetched.
const probe = `<script>
(function () {
  var r = {charts: [], totals: {}, resources: performance.getEntriesByType('resource').length};
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var drawn = 0;
    svg.querySelectorAll('g.point').forEach(function (g) {
      var h = 0;
      g.querySelectorAll('rect').forEach(function (r) { h += r.getBoundingClientRect().height; });
      if (h > 0) drawn++;
    });
    r.charts.push({id: svg.id, declared: Number(svg.dataset.points), points: svg.querySelectorAll('g.point').length, drawn: drawn});
  });
  document.querySelectorAll('[data-total]').forEach(function (e) { r.totals[e.dataset.total] = e.textContent.trim(); });
  document.documentElement.setAttribute('data-check', JSON.stringify(r));
})();
</script>`

type probed struct {
	Charts []struct {
		ID                      string
		Declared, Points, Drawn int
	}
	Totals    map[string]string
	Resources int
}

var checkAttr = regexp.MustCompile(`data-check="([^"]*)"`)

// consoleMessages are the console lines Chromium logged (--enable-logging=stderr).
func consoleMessages(log []byte) []string {
	var out []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			out = append(out, l)
		}
	}
	return out
}

// TestStatementInBrowser opens the statement of a month in Debian's headless Chromium: no
// console message, nothing fetched, the totals shown are the report's, the daily chart has a
// point per day, and a screenshot is not blank. The API refuses another tenant's statement.
func TestStatementInBrowser(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	f := newFixture(12)
	st, err := Build(ctx, f.source(), "acme", november, now)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := Render(&page, st); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "statement.html")
	probedPage := filepath.Join(dir, "probed.html")
	withProbe := strings.Replace(page.String(), "</body>", probe+"\n</body>", 1)
	for path, data := range map[string]string{plain: page.String(), probedPage: withProbe} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	dom, log, err := headless(ctx, probedPage, "--enable-logging=stderr", "--v=0", "--dump-dom")
	if err != nil {
		t.Fatal(err)
	}
	if msgs := consoleMessages(log); len(msgs) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(msgs, "\n"))
	}
	m := checkAttr.FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the probe left no result in the DOM (did it run?):\n%.2000s", dom)
	}
	var got probed
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &got); err != nil {
		t.Fatal(err)
	}
	if got.Resources != 0 {
		t.Errorf("the page fetched %d resources; want none", got.Resources)
	}

	// The report's totals for acme's month, as the report renders money (6 decimals).
	start, end := november.Bounds(time.UTC)
	month, _ := f.report(ctx, start, end, false)
	var want Totals
	for _, r := range month.Only("acme").Tenants {
		want.add(r)
	}
	for name, v := range map[string]string{"cost": money(want.Cost), "list_cost": money(want.ListCost), "tier_discount": money(want.ListCost - want.Cost),
		"waste_cost": money(want.WasteCost), "overhead_cost": money(want.OverheadCost), "unmetered_seconds": "0"} {
		if got.Totals[name] != v {
			t.Errorf("total %s in the DOM: %q; the report's: %q", name, got.Totals[name], v)
		}
	}
	if len(got.Charts) != 1 {
		t.Fatalf("%d charts, want the daily chart", len(got.Charts))
	}
	for _, c := range got.Charts {
		if c.Declared != 30 || c.Points != 30 {
			t.Errorf("chart %s: %d points (declares %d), want November's 30 days", c.ID, c.Points, c.Declared)
		}
		billed := 0
		for _, d := range st.Days {
			if d.Cost > 0 {
				billed++
			}
		}
		if c.Drawn != billed || billed == 0 {
			t.Errorf("chart %s: %d bars drawn with a height, want one per billed day: %d", c.ID, c.Drawn, billed)
		}
	}

	shot := filepath.Join(dir, "statement.png")
	if out := os.Getenv("STATEMENT_SCREENSHOT"); out != "" {
		shot = out // to look at it
	}
	if _, err := Headless(ctx, plain, "--hide-scrollbars", "--window-size=1280,2200", "--screenshot="+shot); err != nil {
		t.Fatal(err)
	}
	checkNotBlank(t, shot)

	pdf := filepath.Join(dir, "statement.pdf")
	if err := PDF(ctx, plain, pdf); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(pdf); !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Errorf("the PDF does not start with %%PDF-: %.20q", b)
	}
}

// checkNotBlank wants a screenshot with ink on it and the chart's used and waste colours.
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	img, err := png.Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	near := func(r, g, b uint32, want [3]uint32) bool {
		d := func(a, b uint32) uint32 {
			if a > b {
				return a - b
			}
			return b - a
		}
		return d(r>>8, want[0])+d(g>>8, want[1])+d(b>>8, want[2]) < 24
	}
	var ink, used, waste int
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			switch {
			case near(r, g, b, [3]uint32{0x2f, 0x6f, 0xdb}):
				used++
			case near(r, g, b, [3]uint32{0xe8, 0x83, 0x3a}):
				waste++
			}
			if r>>8 < 235 || g>>8 < 235 || b>>8 < 235 {
				ink++
			}
		}
	}
	total := bounds.Dx() * bounds.Dy()
	if ink*100 < total || used < 1000 || waste < 1000 {
		t.Errorf("the screenshot %s looks blank: %d of %d pixels inked, %d used-blue, %d waste-orange", path, ink, total, used, waste)
	}
}

// The probe can fail: a page that logs to the console is caught.
func TestConsoleMessagesAreCaught(t *testing.T) {
	needChromium(t)
	page := filepath.Join(t.TempDir(), "bad.html")
	if err := os.WriteFile(page, []byte(`<!DOCTYPE html><p>x</p><script>console.error("boom")</script>`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, log, err := headless(context.Background(), page, "--enable-logging=stderr", "--v=0", "--dump-dom")
	if err != nil {
		t.Fatal(err)
	}
	if msgs := consoleMessages(log); len(msgs) != 1 || !strings.Contains(msgs[0], "boom") {
		t.Errorf("console messages %q; want the one error", msgs)
	}
}

// TestStatementAPI: GET /api/v1/statement with real bearer tokens: a tenant reads its own
// statement, not another's (403); finance reads any.
func TestStatementAPI(t *testing.T) {
	f := newFixture(3)
	token := func(name string, p api.Principal) auth.Token {
		h, err := bcrypt.GenerateFromPassword([]byte(name+"-secret"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		p.Name = name
		return auth.Token{Name: name, Hash: h, Principal: p}
	}
	s := &api.Server{Auth: auth.New([]auth.Token{
		token("acme", api.Principal{Role: api.RoleTenant, Tenants: []string{"acme"}}),
		token("finance", api.Principal{Role: api.RoleFinance}),
	}, nil), Statement: Page(f.source())}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		token, query string
		status       int
	}{
		{"acme", "tenant=acme&period=2026-11", 200},
		{"acme", "period=2026-11", 200},
		{"acme", "tenant=globex&period=2026-11", 403},
		{"finance", "tenant=globex&period=2026-11", 200},
		{"finance", "tenant=globex&period=11-2026", 400},
		{"nobody", "tenant=acme&period=2026-11", 401},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/statement?"+tc.query, nil)
		req.Header.Set("Authorization", "Bearer "+tc.token+"-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d: %.300s", tc.token, tc.query, resp.StatusCode, tc.status, body.String())
			continue
		}
		if tc.status != 200 {
			continue
		}
		tenant := "acme"
		if strings.Contains(tc.query, "globex") {
			tenant = "globex"
		}
		if !strings.Contains(body.String(), "<h1>Statement of "+tenant+"</h1>") || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: not %s's statement with a CSP: %.300s", tc.token, tc.query, tenant, body.String())
		}
	}
}
