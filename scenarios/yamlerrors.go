package scenarios

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
)

// A section is one mapping of the scenario file: its path ("workload.load") and the fields it
// takes, as they are spelled in the file.
type section struct {
	path   string
	fields []string
}

// sections maps the Go type name the YAML decoder reports ("scenarios.WorkloadSpec") to the
// section of the scenario file it decodes. Built on first use: only a bad file needs it.
var sections = sync.OnceValue(func() map[string]section {
	out := make(map[string]section)
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || custom(t) {
			return
		}
		if _, seen := out[t.String()]; seen {
			return
		}
		sec := section{path: path}
		out[t.String()] = sec // before the fields: a type that holds itself stops here
		var add func(t reflect.Type)
		add = func(t reflect.Type) {
			for i := range t.NumField() {
				f := t.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				switch {
				case name == "-" || (!f.IsExported() && !f.Anonymous):
				case strings.Contains(opts, "inline"):
					add(f.Type)
				default:
					if name == "" {
						name = strings.ToLower(f.Name)
					}
					sec.fields = append(sec.fields, name)
					sub := name
					if path != "" {
						sub = path + "." + name
					}
					walk(f.Type, sub)
				}
			}
		}
		add(t)
		out[t.String()] = sec
	}
	walk(reflect.TypeOf(Scenario{}), "")
	return out
})

// custom reports whether t decodes itself from YAML (a duration, a selector, a step), so its
// Go fields are not the file's.
func custom(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(reflect.TypeFor[yaml.Unmarshaler]()) || p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

var (
	unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	wrongKind    = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
)

// explainYAML rewrites the YAML decoder's errors in the scenario file's words: an unknown
// field names its section, the closest field and the fields the section takes; a value of the
// wrong kind says what the field wants. Anything else is returned as it came.
func explainYAML(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	lines := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		lines = append(lines, explainLine(e))
	}
	return errors.New(strings.Join(lines, "; "))
}

func explainLine(e string) string {
	if m := unknownField.FindStringSubmatch(e); m != nil {
		sec, ok := sections()[m[3]]
		if !ok {
			return e
		}
		where := sec.path
		if where == "" {
			where = "the scenario"
		}
		hint := ""
		if near := nemesis.Closest(m[2], sec.fields); near != "" {
			hint = " (did you mean " + near + "?)"
		}
		return fmt.Sprintf("line %s: %s has no field %q%s; its fields are %s", m[1], where, m[2], hint, strings.Join(sec.fields, ", "))
	}
	if m := wrongKind.FindStringSubmatch(e); m != nil {
		got := fmt.Sprintf("the %s %s", kindName(m[2]), m[3])
		if sec, ok := sections()[m[4]]; ok {
			return fmt.Sprintf("line %s: %s wants a mapping of %s, not %s", m[1], sec.path, strings.Join(sec.fields, ", "), got)
		}
		return fmt.Sprintf("line %s: want %s, not %s", m[1], wantName(m[4]), got)
	}
	return e
}

// kindName is a YAML tag in words: "!!bool" is a bool.
func kindName(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "int", "float":
		return "number"
	case "seq":
		return "list"
	case "map":
		return "mapping"
	}
	return tag
}

// wantName is what a Go type the decoder names wants, in a file's words.
func wantName(goType string) string {
	switch {
	case goType == reflect.TypeFor[units.Duration]().String():
		return "a duration with a unit, like 2s or 500ms"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return goType
}

// fieldPath finds, in an error of Validate, the file's path it names first
// ("nemesis.script[2]", "workload.processes").
var fieldPath = regexp.MustCompile(`(?:^|: )((?:name|description|cluster|workload|nemesis|duration|promises|requires|on_kafka)(?:\.[a-z_]+|\[\d+\])*)[ :]`)

// sectionField finds a section's error that names the field after it ("workload: processes:
// must be at least 1"), the form a section's own Validate takes.
var sectionField = regexp.MustCompile(`(?:^|: )(workload|cluster|nemesis): ([a-z_]+(?:\.[a-z_]+)*):`)

// errorLine is the line of the scenario file b that err, an error of Validate, is about; 0
// when it names no field the file holds.
func errorLine(b []byte, err error) int {
	msg := err.Error()
	if m := sectionField.FindStringSubmatch(msg); m != nil {
		if line := lineOf(b, m[1]+"."+m[2]); line > 0 {
			return line
		}
	}
	if m := fieldPath.FindStringSubmatch(msg); m != nil {
		return lineOf(b, m[1])
	}
	return 0
}

// lineOf returns the line of the node at path in the YAML document b ("nemesis.script[2]"), or
// of the deepest node of path that exists; 0 when b does not parse or the path's first key is
// missing.
func lineOf(b []byte, path string) int {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	n, line := doc.Content[0], 0
	for _, part := range strings.Split(path, ".") {
		key, idx := part, -1
		if i := strings.IndexByte(part, '['); i > 0 {
			key = part[:i]
			idx, _ = strconv.Atoi(strings.TrimSuffix(part[i+1:], "]"))
		}
		next := mapValue(n, key)
		if next == nil {
			return line
		}
		n, line = next, next.Line
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n, line = n.Content[idx], n.Content[idx].Line
		}
	}
	return line
}

// mapValue is the value of key in the mapping node n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
