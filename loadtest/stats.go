package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// quantile is the nearest-rank q-quantile of xs (0 when empty).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// spread is a figure over rounds: its median and its range.
type spread struct {
	N      int     `json:"n"` // rounds that had the figure
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	return spread{N: len(xs), Median: quantile(xs, 0.5), Min: slices.Min(xs), Max: slices.Max(xs)}
}

// figure is one line of the watchers comparison: refundd, the bare
// reference, and the ratio of the two taken per round (so the ratio's
// median is not the ratio of the medians).
type figure struct {
	Key     string  `json:"key"`
	What    string  `json:"what"`
	Refundd spread  `json:"refundd"`
	Bare    *spread `json:"bare,omitempty"`
	Ratio   *spread `json:"ratio,omitempty"`
}

// compare builds the figures for keys from per-round values of each target.
func compare(keys []metricKey, refundd, bare []map[string]float64) []figure {
	var out []figure
	for _, k := range keys {
		f := figure{Key: k.key, What: k.what, Refundd: spreadOf(column(refundd, k.key))}
		if len(bare) > 0 {
			b := spreadOf(column(bare, k.key))
			f.Bare = &b
			var ratios []float64
			for i := range min(len(refundd), len(bare)) {
				r, okR := refundd[i][k.key]
				b, okB := bare[i][k.key]
				if okR && okB && b != 0 {
					ratios = append(ratios, r/b)
				}
			}
			if len(ratios) > 0 {
				rs := spreadOf(ratios)
				f.Ratio = &rs
			}
		}
		out = append(out, f)
	}
	return out
}

func column(rounds []map[string]float64, key string) []float64 {
	var xs []float64
	for _, r := range rounds {
		if v, ok := r[key]; ok {
			xs = append(xs, v)
		}
	}
	return xs
}

type metricKey struct{ key, what string }

// num prints a figure with about three significant digits.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "n/a"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func (s spread) String() string {
	if s.N == 0 {
		return "n/a"
	}
	if s.Min == s.Max {
		return num(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
}

// table prints figures as a Markdown table a person can paste.
func table(figs []figure) string {
	var b strings.Builder
	b.WriteString("| what | refundd | bare | refundd / bare |\n|---|---:|---:|---:|\n")
	for _, f := range figs {
		bare, ratio := "", ""
		if f.Bare != nil {
			bare = f.Bare.String()
		}
		if f.Ratio != nil {
			ratio = f.Ratio.String() + "×"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.What, f.Refundd, bare, ratio)
	}
	return b.String()
}

// topCounts returns the n largest entries of m, largest first.
func topCounts(m map[string]int, n int) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return cmp.Or(cmp.Compare(b.N, a.N), strings.Compare(a.K, b.K)) })
	return out[:min(n, len(out))]
}

type kv struct {
	K string
	N int
}
