package monitoring_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// expr is one PromQL expression of the files, and where it stands.
type expr struct{ where, text string }

// The alert rules are a valid Prometheus rule file (as promtool checks
// them: YAML, PromQL, templates), and each expression selects exported
// metrics by exported labels only.
func TestAlertRules(t *testing.T) {
	groups, errs := rulefmt.ParseFile("alerts.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.Default())
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	var exprs []expr
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, expr{"alert " + r.Alert, r.Expr})
		}
	}
	if len(exprs) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	checkExprs(t, exported(t), exprs)
}

// Every query of the dashboard (panels and variables) is valid PromQL and
// selects exported metrics by exported labels only; every exported metric
// is on the dashboard.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	exprs := d.exprs(t)
	if len(exprs) == 0 {
		t.Fatal("dashboard.json has no queries")
	}
	metrics := exported(t)
	used := checkExprs(t, metrics, exprs)
	for _, m := range metrics {
		if !used[m.family] {
			used[m.family] = true // once
			t.Errorf("metric %s is on no panel of the dashboard", m.family)
		}
	}
}

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// labelValues is a variable's label_values(selector, label) query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

func (d dashboard) exprs(t *testing.T) []expr {
	var out []expr
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, expr{"panel " + p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: query: %v", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		// The label must be on the series: select it.
		out = append(out, expr{"variable " + v.Name, "count by (" + m[2] + ") (" + m[1] + `{` + m[2] + `!=""})`})
	}
	return out
}

// grafanaVars are Grafana's variables in a query: $__rate_interval and the
// like (durations), and the dashboard's own ($job, ${job:regex}; regexes).
var (
	grafanaInterval = regexp.MustCompile(`\$\{?__[a-z_]+\}?`)
	grafanaVar      = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*(:[a-z]+)?\}?`)
)

// checkExprs parses each expression and checks its selectors against the
// exported metrics; it returns the metric families they use.
func checkExprs(t *testing.T, metrics map[string]metric, exprs []expr) map[string]bool {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	used := map[string]bool{}
	for _, e := range exprs {
		text := grafanaVar.ReplaceAllString(grafanaInterval.ReplaceAllString(e.text, "5m"), ".*")
		ast, err := p.ParseExpr(text)
		if err != nil {
			t.Errorf("%s: %q: %v", e.where, e.text, err)
			continue
		}
		sels := parser.ExtractSelectors(ast)
		if len(sels) == 0 {
			t.Errorf("%s: %q selects no metric", e.where, e.text)
		}
		for _, sel := range sels {
			name := metricName(sel)
			m, ok := metrics[name]
			if !ok {
				t.Errorf("%s: %q: metric %q is not exported by the Collector", e.where, e.text, name)
				continue
			}
			used[m.family] = true
			for _, l := range sel {
				if l.Name != model.MetricNameLabel && !m.labels[l.Name] {
					t.Errorf("%s: %q: %s has no label %q (it has %v)", e.where, e.text, name, l.Name, keys(m.labels))
				}
			}
		}
	}
	return used
}

// metricName returns the name a selector matches exactly, or "".
func metricName(sel []*labels.Matcher) string {
	for _, l := range sel {
		if l.Name == model.MetricNameLabel && l.Type == labels.MatchEqual {
			return l.Value
		}
	}
	return ""
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
