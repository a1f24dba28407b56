package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Words shared by the staff pages (the queue, support's pages, the admin's
// pages and the audit log), in the viewer's language: their catalogue keys
// are queue.*, support.*, admin.*, webhooks.*, provider.* and audit.*.

// staffTime is t as the staff pages write it, in UTC, to the minute,
// second or millisecond (precision "minute", "second", "milli"):
// static/localtime.js writes it again in the viewer's zone.
func staffTime(l Lang, t time.Time, precision string) string {
	return t.UTC().Format(l.T("support.time." + precision))
}

// roleWords is a role as l names it ("approver", "审批人").
func roleWords(l Lang, role string) string {
	if key := "admin.role." + role; l.has(key) {
		return l.T(key)
	}
	return role
}

// segment is a piece of a sentence: plain words, or a value the page
// marks (Tag "strong" or "code").
type segment struct{ Text, Tag string }

// mark is the byte around a marked value while its sentence is filled in;
// no catalogue's words hold it.
const mark = "\x1f"

// marked is key's words in l filled in with data, the values of names
// apart as segments of tag: the catalogue orders the sentence, the page
// marks its values.
func marked(l Lang, key string, data map[string]any, tag string, names ...string) []segment {
	tags := make(map[string]string, len(names))
	for _, name := range names {
		tags[name] = tag
	}
	return markedAs(l, key, data, tags)
}

// markedAs is marked with a tag for each value apart (tags: name → tag).
func markedAs(l Lang, key string, data map[string]any, tags map[string]string) []segment {
	filled := make(map[string]any, len(data))
	for k, v := range data {
		filled[k] = v
	}
	names := make([]string, 0, len(tags))
	for name := range tags {
		filled[name] = mark + strconv.Itoa(len(names)) + mark
		names = append(names, name)
	}
	var out []segment
	for i, part := range strings.Split(l.T(key, filled), mark) {
		switch {
		case i%2 == 0 && part != "":
			out = append(out, segment{Text: part})
		case i%2 == 1:
			n, _ := strconv.Atoi(part)
			out = append(out, segment{Text: fmt.Sprint(data[names[n]]), Tag: tags[names[n]]})
		}
	}
	return out
}

// ageWords is how old something is, to the second, in l: "2m5s" in
// English as Go writes a duration, "2 分 5 秒" in Chinese.
func ageWords(l Lang, d time.Duration) string {
	s := int64(max(d.Round(time.Second), 0) / time.Second)
	data := map[string]any{"H": s / 3600, "M": s % 3600 / 60, "S": s % 60}
	switch {
	case s < 60:
		return l.T("webhooks.age.s", data)
	case s < 3600:
		return l.T("webhooks.age.ms", data)
	}
	return l.T("webhooks.age.hms", data)
}
