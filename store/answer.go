package store

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
)

// Answer is a run's final answer in every language the words table
// speaks: Body in English (the API's final_message unless the client asks
// for another language), In the same answer in each other language, by
// its BCP 47 tag. The words are written once, when the run ends, from the
// facts of its end (views.Answers), so a page shows the answer in its
// viewer's language without a second copy of the rule that chose it.
type Answer struct {
	Body string
	In   Translations
}

// Say is an answer in English only.
func Say(body string) Answer { return Answer{Body: body} }

// Text is the answer in the language tag, English when it has none there.
func (a Answer) Text(tag string) string { return a.In.Or(tag, a.Body) }

// Translations are words by language tag, stored as a jsonb object.
type Translations map[string]string

// Or is t's words in tag, or english when t has none.
func (t Translations) Or(tag, english string) string {
	if s, ok := t[tag]; ok && s != "" {
		return s
	}
	return english
}

// Value stores t as a jsonb object ('{}' for none), as text: with
// binary_parameters, []byte would go as jsonb's binary form.
func (t Translations) Value() (driver.Value, error) {
	if t == nil {
		return "{}", nil
	}
	b, err := json.Marshal(map[string]string(t))
	return string(b), err
}

// Scan reads a jsonb object.
func (t *Translations) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		*t = nil
		return nil
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return fmt.Errorf("store: translations from %T", src)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("store: translations: %w", err)
	}
	if len(m) == 0 {
		m = nil
	}
	*t = m
	return nil
}
