// Package monitoring holds a Grafana dashboard (dashboard.json) and
// Prometheus alerting rules (alerts.yml) for the metrics of
// extra/redislockprom; it has no Go API. Its tests parse every PromQL
// expression in both files with Prometheus' own parser and check that each
// selector names a metric, and only labels, that a redislockprom Collector
// exports, and that the dashboard shows every metric. It is a module of
// its own, outside the repository's go.work, so that the Prometheus
// server's packages, which the check needs, stay out of the adapter's
// dependencies and of the workspace: run its tests with
//
//	GOWORK=off go test ./...
package monitoring
