package logfeed

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The ECS definitions the schema test checks against are a trimmed copy of
// elastic/ecs generated/ (see testdata/ecs/NOTICE). TestECSTestdata
// regenerates them, and the excerpt of the originals it checks the
// generator with, from a checkout of the full files:
//
//	go test ./internal/logfeed -run TestECSTestdata -ecs-source=DIR
//
// Without the flag it reads nothing outside the repository: it runs the
// generator on the excerpt (testdata/ecs/source) and checks what it makes
// against the committed files.
var ecsSource = flag.String("ecs-source", "", "directory holding ECS fields.csv and ecs_flat.yml to regenerate testdata/ecs from")

// ecsExcerpt holds a few rows of the original fields.csv and the blocks of
// the categorized fields from the original ecs_flat.yml, as they are there.
const ecsExcerpt = "testdata/ecs/source"

// excerptFields are the fields.csv rows kept in the excerpt: some of every
// field set the log feed writes, arrays among them.
var excerptFields = []string{
	"@timestamp", "container.id", "event.category", "event.kind", "host.boot.id",
	"process.args", "process.entity_id", "process.parent.pid", "process.supplemental_groups.id",
}

const (
	ecsFieldsFile  = "testdata/ecs/fields.csv"
	ecsAllowedFile = "testdata/ecs/allowed_values.json"
)

// categorized are the ECS fields whose values must be among allowed_values.
var categorized = []string{"event.kind", "event.category", "event.type", "event.outcome"}

// fieldsColumns are the columns of fields.csv kept in testdata.
var fieldsColumns = []string{"ECS_Version", "Field_Set", "Field", "Type", "Level", "Normalization"}

type allowedValue struct {
	Name               string   `json:"name"`
	ExpectedEventTypes []string `json:"expected_event_types,omitempty"`
}

type allowedFile struct {
	Source string                    `json:"source"`
	Fields map[string][]allowedValue `json:"allowed_values"`
}

type ecsField struct {
	set, typ string
	array    bool
}

type ecsDefs struct {
	version string
	fields  map[string]ecsField
	sets    map[string]bool
	allowed map[string][]allowedValue
}

// trimFields keeps fieldsColumns of every row of a full fields.csv.
func trimFields(r io.Reader) ([]byte, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("empty fields.csv")
	}
	idx := make([]int, len(fieldsColumns))
	for i, name := range fieldsColumns {
		idx[i] = -1
		for j, h := range rows[0] {
			if h == name {
				idx[i] = j
			}
		}
		if idx[i] < 0 {
			return nil, fmt.Errorf("fields.csv has no column %s", name)
		}
	}
	var out bytes.Buffer
	w := csv.NewWriter(&out)
	for _, row := range rows {
		rec := make([]string, len(idx))
		for i, j := range idx {
			rec[i] = row[j]
		}
		if err := w.Write(rec); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return out.Bytes(), w.Error()
}

// extractAllowed reads the allowed_values of the categorization fields from
// ecs_flat.yml. The file is generated with a fixed layout (top-level keys at
// column 0, allowed_values items at indent 2, their keys at indent 4), which
// this line scanner relies on instead of a YAML library.
func extractAllowed(r io.Reader) (map[string][]allowedValue, error) {
	want := map[string]bool{}
	for _, f := range categorized {
		want[f] = true
	}
	out := map[string][]allowedValue{}
	var field string
	var inAllowed, inExpected bool
	var cur *allowedValue
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	unquote := func(s string) string { return strings.Trim(strings.TrimSpace(s), `'"`) }
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			continue
		case line[0] != ' ':
			field, inAllowed, cur = "", false, nil
			if k := strings.TrimSuffix(unquote(strings.TrimSuffix(line, ":")), ":"); want[k] {
				field = k
			}
			continue
		case field == "":
			continue
		case strings.HasPrefix(line, "  - ") && inAllowed:
			out[field] = append(out[field], allowedValue{})
			cur = &out[field][len(out[field])-1]
			inExpected = false
			line = "    " + line[4:]
		case strings.HasPrefix(line, "  ") && line[2] != ' ':
			inAllowed = line == "  allowed_values:"
			cur = nil
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "    - ") && inExpected:
			cur.ExpectedEventTypes = append(cur.ExpectedEventTypes, unquote(line[6:]))
		case strings.HasPrefix(line, "    ") && line[4] != ' ':
			k, v, _ := strings.Cut(line[4:], ":")
			inExpected = k == "expected_event_types"
			if k == "name" {
				cur.Name = unquote(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, f := range categorized {
		if len(out[f]) == 0 {
			return nil, fmt.Errorf("no allowed_values for %s", f)
		}
		for _, v := range out[f] {
			if v.Name == "" {
				return nil, fmt.Errorf("an allowed value of %s has no name", f)
			}
		}
	}
	return out, nil
}

// generateECS renders the testdata files from a directory of full ones.
func generateECS(src string) (fields, allowed []byte, err error) {
	f, err := os.Open(filepath.Join(src, "fields.csv"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fields, err = trimFields(f); err != nil {
		return nil, nil, fmt.Errorf("fields.csv: %w", err)
	}
	y, err := os.Open(filepath.Join(src, "ecs_flat.yml"))
	if err != nil {
		return nil, nil, err
	}
	defer y.Close()
	vals, err := extractAllowed(y)
	if err != nil {
		return nil, nil, fmt.Errorf("ecs_flat.yml: %w", err)
	}
	allowed, err = json.MarshalIndent(allowedFile{
		Source: "elastic/ecs generated/elasticsearch ecs_flat.yml, version 9.5.0-dev, commit b85f7573 (Apache-2.0); allowed_values names and expected_event_types only",
		Fields: vals,
	}, "", "  ")
	return fields, append(allowed, '\n'), err
}

// excerptECS renders the excerpt (fields.csv, ecs_flat.yml) of a directory
// of full files: the header and excerptFields' rows of fields.csv, and the
// top-level blocks of the categorized fields of ecs_flat.yml.
func excerptECS(src string) (fields, flat []byte, err error) {
	csvData, err := os.ReadFile(filepath.Join(src, "fields.csv"))
	if err != nil {
		return nil, nil, err
	}
	rows, err := csv.NewReader(bytes.NewReader(csvData)).ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, nil, fmt.Errorf("fields.csv: %v rows, %w", len(rows), err)
	}
	col := slices.Index(rows[0], "Field")
	if col < 0 {
		return nil, nil, fmt.Errorf("fields.csv has no column Field")
	}
	var out bytes.Buffer
	w := csv.NewWriter(&out)
	for i, r := range rows {
		if i == 0 || slices.Contains(excerptFields, r[col]) {
			if err := w.Write(r); err != nil {
				return nil, nil, err
			}
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, nil, err
	}
	y, err := os.ReadFile(filepath.Join(src, "ecs_flat.yml"))
	if err != nil {
		return nil, nil, err
	}
	var keep bool
	var blocks bytes.Buffer
	for line := range bytes.Lines(y) {
		if len(line) > 0 && line[0] != ' ' && line[0] != '\n' {
			keep = slices.Contains(categorized, strings.TrimSuffix(strings.TrimSpace(string(line)), ":"))
		}
		if keep {
			blocks.Write(line)
		}
	}
	return out.Bytes(), blocks.Bytes(), nil
}

func TestECSTestdata(t *testing.T) {
	if src := *ecsSource; src != "" {
		fields, allowed, err := generateECS(src)
		if err != nil {
			t.Fatal(err)
		}
		exFields, exFlat, err := excerptECS(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(ecsExcerpt, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, data := range map[string][]byte{
			ecsFieldsFile: fields, ecsAllowedFile: allowed,
			filepath.Join(ecsExcerpt, "fields.csv"): exFields, filepath.Join(ecsExcerpt, "ecs_flat.yml"): exFlat,
		} {
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	// The excerpt holds every block the allowed values come from, so the
	// generator must make allowed_values.json from it byte for byte; its
	// fields.csv rows, trimmed, must be rows of the committed fields.csv.
	fields, allowed, err := generateECS(ecsExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(ecsAllowedFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(allowed, want) {
		t.Errorf("%s differs from what %s generates; rerun with -ecs-source=DIR", ecsAllowedFile, ecsExcerpt)
	}
	committed, err := os.ReadFile(ecsFieldsFile)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for line := range strings.Lines(string(committed)) {
		have[line] = true
	}
	lines := slices.Collect(strings.Lines(string(fields)))
	if len(lines) != len(excerptFields)+1 {
		t.Fatalf("the excerpt gave %d rows, want a header and %d fields", len(lines), len(excerptFields))
	}
	if first, _, _ := strings.Cut(string(committed), "\n"); lines[0] != first+"\n" {
		t.Errorf("header %q, committed %q", lines[0], first)
	}
	for _, l := range lines[1:] {
		if !have[l] {
			t.Errorf("trimmed excerpt row %q is not in %s", strings.TrimSpace(l), ecsFieldsFile)
		}
	}
}

// loadECS reads the trimmed definitions from testdata.
func loadECS(t testing.TB) *ecsDefs {
	t.Helper()
	f, err := os.Open(ecsFieldsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", ecsFieldsFile, err)
	}
	d := &ecsDefs{fields: map[string]ecsField{}, sets: map[string]bool{}}
	for _, r := range rows[1:] {
		d.version = r[0]
		d.fields[r[2]] = ecsField{set: r[1], typ: r[3], array: strings.Contains(r[5], "array")}
		d.sets[r[1]] = true
		d.sets[strings.SplitN(r[2], ".", 2)[0]] = true
	}
	b, err := os.ReadFile(ecsAllowedFile)
	if err != nil {
		t.Fatal(err)
	}
	var af allowedFile
	if err := json.Unmarshal(b, &af); err != nil {
		t.Fatalf("%s: %v", ecsAllowedFile, err)
	}
	d.allowed = af.Fields
	if len(d.fields) < 1000 || len(d.allowed) != len(categorized) {
		t.Fatalf("ECS testdata looks truncated: %d fields, %d allowed-value lists", len(d.fields), len(d.allowed))
	}
	return d
}
