// Package views holds refundd's templ components: the layout, pages, and the
// fragments that later travel over SSE. Components take plain values and
// the store's plain types (runs, events, operations, Progress) and never
// reach the database.
package views
