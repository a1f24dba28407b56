package handlers_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/refundd/refundd/store"
)

// TestOpenAPI_EventPayloads: every event type the store can write has a
// schema EventPayload_<type> whose properties are its payload struct's JSON
// fields, required unless omitempty, and the Event schema lists every type.
func TestOpenAPI_EventPayloads(t *testing.T) {
	t.Parallel()
	doc, _ := openAPIDoc(t)
	schemas := mapAt(doc, "components", "schemas")
	types := store.EventTypes()
	var enum []string
	for _, v := range sliceAt(mapAt(schemas, "Event", "properties", "type"), "enum") {
		s, _ := v.(string)
		enum = append(enum, s)
	}
	if !slices.Equal(enum, types) {
		t.Errorf("Event.type enum = %v, want %v", enum, types)
	}
	for name := range schemas {
		if typ, ok := strings.CutPrefix(name, "EventPayload_"); ok && !slices.Contains(types, typ) {
			t.Errorf("schema %s documents no event type the store writes", name)
		}
	}
	for _, p := range store.Payloads() {
		t.Run(p.EventType(), func(t *testing.T) {
			schema, ok := schemas["EventPayload_"+p.EventType()].(map[string]any)
			if !ok {
				t.Fatalf("no schema EventPayload_%s", p.EventType())
			}
			fields, required := jsonFields(reflect.TypeOf(p))
			var props []string
			for k := range mapAt(schema, "properties") {
				props = append(props, k)
			}
			slices.Sort(props)
			if !slices.Equal(props, fields) {
				t.Errorf("properties = %v, want %v (the fields of %T)", props, fields, p)
			}
			var req []string
			for _, v := range sliceAt(schema, "required") {
				s, _ := v.(string)
				req = append(req, s)
			}
			slices.Sort(req)
			if !slices.Equal(req, required) {
				t.Errorf("required = %v, want %v (the fields of %T without omitempty)", req, required, p)
			}
		})
	}
}

// jsonFields are the JSON names of t's fields, embedded structs' included,
// sorted, and those of them that are not omitempty.
func jsonFields(t reflect.Type) (all, required []string) {
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			required = append(required, name)
		}
	}
	slices.Sort(all)
	slices.Sort(required)
	return all, required
}

// mapAt walks keys down a decoded JSON document; nil where one is missing.
func mapAt(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}

// sliceAt is m[key] as a JSON array; nil if it is not one.
func sliceAt(m map[string]any, key string) []any {
	s, _ := m[key].([]any)
	return s
}
