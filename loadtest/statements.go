package main

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// stmtShare is one statement (as pg_stat_statements normalizes it, spaces
// squeezed and cut short) and its calls a run.
type stmtShare struct {
	Query  string  `json:"query"`
	PerRun float64 `json:"per_run"`
}

// topStatementsShown is how many of the most called statements a summary
// lists.
const topStatementsShown = 25

// stmtCalls are pg_stat_statements' calls by statement in refundd's
// database (the load test's own reads of the views left out).
func stmtCalls(ctx context.Context, db *sql.DB) (map[string]float64, error) {
	if _, err := db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return nil, fmt.Errorf("pg_stat_statements (run with -statements and no -url): %w", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT query, sum(calls) FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND query NOT LIKE '%pg_stat%' GROUP BY query`)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements (run with -statements and no -url): %w", err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var q string
		var n float64
		if err := rows.Scan(&q, &n); err != nil {
			return nil, err
		}
		out[q] = n
	}
	return out, rows.Err()
}

var spaces = regexp.MustCompile(`\s+`)

// topStatements are the statements called most between before and
// after, each over runs (the runs finished in the window).
func topStatements(before, after map[string]float64, runs float64) []stmtShare {
	if runs == 0 {
		return nil
	}
	var out []stmtShare
	for q, n := range after {
		if d := n - before[q]; d > 0 {
			q = strings.TrimSpace(spaces.ReplaceAllString(q, " "))
			if r := []rune(q); len(r) > 140 {
				q = string(r[:140]) + "…"
			}
			out = append(out, stmtShare{Query: q, PerRun: d / runs})
		}
	}
	slices.SortFunc(out, func(a, b stmtShare) int {
		switch {
		case a.PerRun > b.PerRun:
			return -1
		case a.PerRun < b.PerRun:
			return 1
		}
		return strings.Compare(a.Query, b.Query)
	})
	return out[:min(len(out), topStatementsShown)]
}
