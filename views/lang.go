package views

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// The catalogues: one TOML file a language under locales/, named by its
// BCP 47 tag (en.toml, zh-CN.toml). English is the source: every other
// catalogue holds the same keys (TestCatalogues_EveryKeyInEveryLanguage),
// so adding a language is adding its file and nothing else.
//
//go:embed locales/*.toml
var localeFiles embed.FS

// Languages are the catalogues a process speaks and how a viewer's
// language is chosen among them.
type Languages struct {
	bundle  *i18n.Bundle
	tags    []language.Tag // English first
	matcher language.Matcher
	langs   map[language.Tag]Lang // one each, made once: every request chooses one
}

// Catalogues are the languages of locales/, loaded once.
var Catalogues = mustLoadLanguages(localeFiles, "locales")

func mustLoadLanguages(fsys fs.FS, dir string) *Languages {
	l, err := LoadLanguages(fsys, dir)
	if err != nil {
		panic(err)
	}
	return l
}

// LoadLanguages reads every .toml catalogue in dir of fsys; en.toml must
// be among them.
func LoadLanguages(fsys fs.FS, dir string) (*Languages, error) {
	b := i18n.NewBundle(language.English)
	b.RegisterUnmarshalFunc("toml", toml.Unmarshal)
	names, err := fs.Glob(fsys, path.Join(dir, "*.toml"))
	if err != nil {
		return nil, fmt.Errorf("views: catalogues: %w", err)
	}
	tags, english := []language.Tag{language.English}, false
	for _, name := range names {
		buf, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("views: catalogue %s: %w", name, err)
		}
		f, err := b.ParseMessageFileBytes(buf, name)
		if err != nil {
			return nil, fmt.Errorf("views: catalogue %s: %w", name, err)
		}
		switch {
		case f.Tag == language.English:
			english = true
		case !slices.Contains(tags, f.Tag):
			tags = append(tags, f.Tag)
		}
	}
	if !english {
		return nil, fmt.Errorf("views: no English catalogue (en.toml) in %s", dir)
	}
	l := &Languages{bundle: b, tags: tags, matcher: language.NewMatcher(tags), langs: map[language.Tag]Lang{}}
	for _, t := range tags {
		l.langs[t] = Lang{Tag: t, loc: i18n.NewLocalizer(b, t.String()), words: new(sync.Map)}
	}
	return l, nil
}

// Tags are the languages spoken, English first.
func (l *Languages) Tags() []language.Tag { return l.tags }

// Choose is the viewer's language: the one they saved if it is spoken,
// else the best match of their browser's Accept-Language, else English.
func (l *Languages) Choose(saved, acceptLanguage string) Lang {
	if t, ok := l.Spoken(saved); ok {
		return l.Lang(t)
	}
	if lang, ok := l.Match(acceptLanguage); ok {
		return lang
	}
	return l.Lang(language.English)
}

// Match is the best match of an Accept-Language among the languages
// spoken; false when none matches (or the header says nothing).
func (l *Languages) Match(acceptLanguage string) (Lang, bool) {
	if prefs, _, err := language.ParseAcceptLanguage(acceptLanguage); err == nil && len(prefs) > 0 {
		if _, i, conf := l.matcher.Match(prefs...); conf != language.No {
			return l.Lang(l.tags[i]), true
		}
	}
	return Lang{}, false
}

// Spoken is the catalogue's tag for s (as a picker sends it, "zh-CN"),
// if s names a language spoken exactly.
func (l *Languages) Spoken(s string) (language.Tag, bool) {
	if strings.TrimSpace(s) == "" {
		return language.Und, false
	}
	t, err := language.Parse(s)
	if err != nil {
		return language.Und, false
	}
	for _, spoken := range l.tags {
		if spoken == t {
			return spoken, true
		}
	}
	return language.Und, false
}

// Lang is the viewer's language t (one of Tags; another tag gets the
// words of its best match).
func (l *Languages) Lang(t language.Tag) Lang {
	if lang, ok := l.langs[t]; ok {
		return lang
	}
	return Lang{Tag: t, loc: i18n.NewLocalizer(l.bundle, t.String())}
}

// Lang is one viewer's language: the words of its catalogue, English
// where it has none.
type Lang struct {
	Tag language.Tag
	loc *i18n.Localizer
	// words holds what T answered for each key without data (a string a
	// key): the same every time, and a page asks for a hundred of them.
	// Only keys of the catalogues are kept, so it is bounded by them. nil
	// for a Lang made on the fly.
	words *sync.Map
}

// English is the language of a viewer nobody chose one for.
var English = Catalogues.Lang(language.English)

// T is the words of key in l, filled in with data (a map or a struct;
// nil for none). A key no catalogue holds is a programming error: it
// shows as the key itself, and the catalogue test fails.
func (l Lang) T(key string, data ...any) string {
	kept := len(data) == 0 && l.words != nil
	if kept {
		if w, ok := l.words.Load(key); ok {
			return w.(string)
		}
	}
	w, err := l.localize(&i18n.LocalizeConfig{MessageID: key, TemplateData: first(data)})
	if err != nil {
		return key
	}
	if kept {
		l.words.Store(key, w)
	}
	return w
}

// N is the words of key for count things (CLDR plural forms), count being
// .Count in the words.
func (l Lang) N(key string, count int, data ...any) string {
	td := first(data)
	if td == nil {
		td = map[string]any{"Count": count}
	}
	w, err := l.localize(&i18n.LocalizeConfig{MessageID: key, PluralCount: count, TemplateData: td})
	if err != nil {
		return key
	}
	return w
}

// localize is c's words in l (English for the zero Lang); an error for a
// key no catalogue holds.
func (l Lang) localize(c *i18n.LocalizeConfig) (string, error) {
	if l.loc == nil {
		l = English
	}
	return l.loc.Localize(c)
}

func first(data []any) any {
	if len(data) == 0 {
		return nil
	}
	return data[0]
}

// Name is the language's own name for itself, as the picker lists it.
func (l Lang) Name() string { return l.T("language.name") }

type langKey struct{}

// WithLang is ctx carrying the viewer's language for the pages it renders.
func WithLang(ctx context.Context, l Lang) context.Context {
	return context.WithValue(ctx, langKey{}, l)
}

// LangFrom is the viewer's language in ctx, English if none was chosen.
func LangFrom(ctx context.Context) Lang {
	if l, ok := ctx.Value(langKey{}).(Lang); ok {
		return l
	}
	return English
}

// T is the words of key in the viewer's language (templates' shorthand).
func T(ctx context.Context, key string, data ...any) string { return LangFrom(ctx).T(key, data...) }

// LocaleFiles are the catalogue files, for tests that read them.
func LocaleFiles() fs.FS { return localeFiles }
