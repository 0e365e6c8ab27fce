package logfeed

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// customNamespace is the top-level name of supervisor-specific fields.
const customNamespace = "supervisor"

// objectArrays are the ECS field-set reuses whose value is an array of
// objects (ECS's reuse note: "this reuse should contain an array of group
// field set objects"); fields.csv lists their leaves without saying so.
var objectArrays = map[string]bool{"process.supplemental_groups": true, "process.parent.supplemental_groups": true}

// checkValueType reports whether v (decoded with UseNumber) is a value of
// the ECS type typ.
func checkValueType(typ string, v any) error {
	switch typ {
	case "keyword", "constant_keyword", "wildcard", "match_only_text", "text", "ip", "version":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("want a string for %s, got %T", typ, v)
		}
	case "long", "integer", "short", "byte", "unsigned_long":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("want an integer for %s, got %T", typ, v)
		}
		if _, err := n.Int64(); err != nil {
			return fmt.Errorf("want an integer for %s, got %s", typ, n)
		}
	case "float", "double", "half_float", "scaled_float":
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("want a number for %s, got %T", typ, v)
		}
	case "date":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("want a date string, got %T", v)
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Errorf("date %q: %v", s, err)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("want a boolean, got %T", v)
		}
	case "object", "flattened", "nested":
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("want an object for %s, got %T", typ, v)
		}
	default:
		return fmt.Errorf("ECS type %q not handled by this test", typ)
	}
	return nil
}

// checkECS checks one line against the ECS definitions: every field outside
// the custom namespace is an ECS field with a value of its type (arrays
// exactly where ECS normalizes to an array), the categorization fields
// take allowed values, each event.type is expected for each
// event.category, and the fields every line needs are there.
func (d *ecsDefs) checkECS(line map[string]any) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var walk func(prefix string, obj map[string]any)
	walk = func(prefix string, obj map[string]any) {
		for k, v := range obj {
			name := prefix + k
			if name == customNamespace {
				continue
			}
			f, isField := d.fields[name]
			if _, ok := v.(map[string]any); ok && objectArrays[name] {
				bad("%s: want an array of objects, got one object", name)
				continue
			}
			if sub, ok := v.(map[string]any); ok && (!isField || f.typ != "object" && f.typ != "flattened") {
				walk(name+".", sub)
				continue
			}
			if arr, ok := v.([]any); ok && objectArrays[name] {
				for _, e := range arr {
					sub, ok := e.(map[string]any)
					if !ok {
						bad("%s: want an array of objects, got a %T in it", name, e)
						continue
					}
					walk(name+".", sub)
				}
				continue
			}
			if !isField {
				bad("%s is not an ECS field", name)
				continue
			}
			if arr, ok := v.([]any); ok {
				if !f.array {
					bad("%s is an array; ECS does not normalize it to one", name)
				}
				for _, e := range arr {
					if err := checkValueType(f.typ, e); err != nil {
						bad("%s: %v", name, err)
					}
				}
				continue
			}
			if f.array {
				bad("%s must be an array (ECS normalization)", name)
			}
			if err := checkValueType(f.typ, v); err != nil {
				bad("%s: %v", name, err)
			}
		}
	}
	walk("", line)

	for _, req := range []string{"@timestamp", "ecs.version", "event.kind", "event.action"} {
		if _, ok := get(line, req); !ok {
			bad("missing %s", req)
		}
	}
	values := func(name string) []string {
		v, ok := get(line, name)
		if !ok {
			return nil
		}
		if s, ok := v.(string); ok {
			return []string{s}
		}
		var out []string
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				s, _ := e.(string)
				out = append(out, s)
			}
		}
		return out
	}
	allowed := func(name, val string) *allowedValue {
		for i, a := range d.allowed[name] {
			if a.Name == val {
				return &d.allowed[name][i]
			}
		}
		return nil
	}
	for _, name := range categorized {
		for _, v := range values(name) {
			if allowed(name, v) == nil {
				bad("%s: %q is not an allowed value", name, v)
			}
		}
	}
	types := values("event.type")
	for _, c := range values("event.category") {
		a := allowed("event.category", c)
		if a == nil {
			continue
		}
		for _, typ := range types {
			if !slices.Contains(a.ExpectedEventTypes, typ) {
				bad("event.type %q is not expected for event.category %q (expected %v)", typ, c, a.ExpectedEventTypes)
			}
		}
	}
	if (len(types) == 0) != (len(values("event.category")) == 0) {
		bad("event.type and event.category go together")
	}
	if v := getString(line, "event.kind"); v == "signal" {
		bad("event.kind signal is reserved for Kibana")
	}
	return problems
}

func TestECSSchema(t *testing.T) {
	d := loadECS(t)
	if d.sets[customNamespace] {
		t.Fatalf("%q is an ECS field set in %s: the custom namespace would collide", customNamespace, d.version)
	}
	lines, _ := produceAll(t, SchemaECS)
	seen := map[string]int{}
	for _, line := range lines {
		action := getString(line, "event.action")
		seen[action]++
		for _, p := range d.checkECS(line) {
			t.Errorf("%s line: %s", action, p)
		}
		if got := getString(line, "ecs.version"); got != ECSVersion {
			t.Errorf("%s line: ecs.version = %q, want %q", action, got, ECSVersion)
		}
	}
	for _, a := range allActions {
		if seen[a] == 0 {
			t.Errorf("no %s line was produced", a)
		}
	}
	if len(seen) != len(allActions) {
		var got []string
		for a := range seen {
			got = append(got, a)
		}
		sort.Strings(got)
		t.Errorf("actions seen %v, want exactly %v", got, allActions)
	}
	if t.Failed() {
		for _, l := range lines {
			b, _ := json.Marshal(l)
			t.Logf("%s", b)
		}
	}
}

// The checker itself must catch what it is there to catch.
func TestECSCheckerRejects(t *testing.T) {
	d := loadECS(t)
	base := func() map[string]any {
		return map[string]any{
			"@timestamp": "2026-01-02T03:04:05.000006Z",
			"ecs":        map[string]any{"version": ECSVersion},
			"event": map[string]any{"kind": "event", "action": "x",
				"category": []any{"process"}, "type": []any{"start"}},
			"process": map[string]any{"pid": json.Number("1")},
		}
	}
	tests := []struct {
		name   string
		modify func(m map[string]any)
		want   string
	}{
		{"unknown field", func(m map[string]any) { m["process"].(map[string]any)["pidd"] = json.Number("1") }, "process.pidd is not an ECS field"},
		{"wrong type", func(m map[string]any) { m["process"].(map[string]any)["pid"] = "1" }, "process.pid: want an integer"},
		{"kind value", func(m map[string]any) { m["event"].(map[string]any)["kind"] = "process" }, `event.kind: "process" is not an allowed value`},
		{"type for category", func(m map[string]any) { m["event"].(map[string]any)["type"] = []any{"denied"} }, `event.type "denied" is not expected`},
		{"not an array", func(m map[string]any) { m["event"].(map[string]any)["category"] = "process" }, "event.category must be an array"},
		{"bad date", func(m map[string]any) { m["@timestamp"] = "yesterday" }, "@timestamp: date"},
		{"outcome value", func(m map[string]any) { m["event"].(map[string]any)["outcome"] = "ok" }, `event.outcome: "ok"`},
		{"object array of scalars", func(m map[string]any) {
			m["process"].(map[string]any)["supplemental_groups"] = []any{"4"}
		}, "process.supplemental_groups: want an array of objects"},
		{"object array as one object", func(m map[string]any) {
			m["process"].(map[string]any)["supplemental_groups"] = map[string]any{"id": "4"}
		}, "process.supplemental_groups: want an array of objects, got one object"},
		{"object array member", func(m map[string]any) {
			m["process"].(map[string]any)["supplemental_groups"] = []any{map[string]any{"gid": "4"}}
		}, "process.supplemental_groups.gid is not an ECS field"},
		{"object array member type", func(m map[string]any) {
			m["process"].(map[string]any)["supplemental_groups"] = []any{map[string]any{"id": json.Number("4")}}
		}, "process.supplemental_groups.id: want a string"},
		{"id as a number", func(m map[string]any) {
			m["process"].(map[string]any)["user"] = map[string]any{"id": json.Number("0")}
		}, "process.user.id: want a string"},
	}
	if p := d.checkECS(base()); len(p) != 0 {
		t.Fatalf("valid line rejected: %v", p)
	}
	for _, tt := range tests {
		m := base()
		tt.modify(m)
		p := d.checkECS(m)
		if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tt.want) }) {
			t.Errorf("%s: problems %v, want one containing %q", tt.name, p, tt.want)
		}
	}
}
