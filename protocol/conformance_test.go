package protocol_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The conformance map (docs/conformance.md) lists every message type, error
// code and field of this package, each with the tests that show it. These
// tests keep the map and the code in step: a field added to a wire type
// without a row fails here, and so does a row citing a test that no longer
// exists.

// wireSource is what this package's non-test files declare for the wire.
type wireSource struct {
	fields map[string][]string // struct name → its JSON field names, in order
	types  map[string]bool     // the values of the Type* constants
	codes  map[string]bool     // the values of the Code* constants
}

func readWireSource(t *testing.T) wireSource {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	src := wireSource{fields: map[string][]string{}, types: map[string]bool{}, codes: map[string]bool{}}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					st, ok := s.Type.(*ast.StructType)
					if !ok || !s.Name.IsExported() {
						continue
					}
					for _, fld := range st.Fields.List {
						if fld.Tag == nil {
							continue
						}
						tag, _ := strconv.Unquote(fld.Tag.Value)
						json, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
						if json != "" && json != "-" {
							src.fields[s.Name.Name] = append(src.fields[s.Name.Name], json)
						}
					}
				case *ast.ValueSpec:
					if gd.Tok != token.CONST {
						continue
					}
					for i, id := range s.Names {
						if i >= len(s.Values) {
							continue
						}
						lit, ok := s.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, _ := strconv.Unquote(lit.Value)
						switch {
						case strings.HasPrefix(id.Name, "Type"):
							src.types[v] = true
						case strings.HasPrefix(id.Name, "Code"):
							src.codes[v] = true
						}
					}
				}
			}
		}
	}
	return src
}

// conformanceMap is what docs/conformance.md lists.
type conformanceMap struct {
	fields map[string][]string // struct name → field names, in the doc's order
	types  map[string]bool
	codes  map[string]bool
	cites  []cite
}

// cite is one "`pkg` TestA, TestB" group of a "Shown by" cell.
type cite struct {
	line  int
	pkg   string
	tests []string
}

var (
	typeHeading = regexp.MustCompile("^### `([A-Za-z0-9]+)`")
	tableRow    = regexp.MustCompile("^\\| `([^`]+)` \\|(.*)\\|\\s*$")
	citeGroup   = regexp.MustCompile("^`([a-z0-9_/]+)` (.+)$")
	testName    = regexp.MustCompile(`^(Test|Fuzz|Example|Benchmark)[A-Za-z0-9_]*$`)
)

func readConformanceMap(t *testing.T) conformanceMap {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := conformanceMap{fields: map[string][]string{}, types: map[string]bool{}, codes: map[string]bool{}}
	const (
		inNone = iota
		inMessages
		inCodes
		inType
	)
	state, current := inNone, ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## Messages"):
			state = inMessages
			continue
		case strings.HasPrefix(line, "## Error codes"):
			state = inCodes
			continue
		case strings.HasPrefix(line, "## "):
			state = inNone
			continue
		}
		if h := typeHeading.FindStringSubmatch(line); h != nil {
			state, current = inType, h[1]
			if _, dup := m.fields[current]; dup {
				t.Errorf("docs/conformance.md:%d: type %s listed twice", n, current)
			}
			m.fields[current] = []string{}
			continue
		}
		row := tableRow.FindStringSubmatch(line)
		if row == nil {
			continue
		}
		cells := strings.Split(row[2], "|")
		shownBy := strings.TrimSpace(cells[len(cells)-1])
		switch state {
		case inMessages:
			m.types[row[1]] = true
		case inCodes:
			m.codes[row[1]] = true
		case inType:
			m.fields[current] = append(m.fields[current], row[1])
		default:
			continue
		}
		if strings.HasPrefix(shownBy, "**not sent**") {
			continue // an optional field Shard never sends; the cell says why
		}
		for _, group := range strings.Split(shownBy, ";") {
			group = strings.TrimSpace(group)
			if group == "" || strings.HasPrefix(group, "**not shown yet**") {
				continue
			}
			g := citeGroup.FindStringSubmatch(group)
			if g == nil {
				t.Errorf("docs/conformance.md:%d: %q is not \"`package` TestName, …\"", n, group)
				continue
			}
			c := cite{line: n, pkg: g[1]}
			for _, name := range strings.Split(g[2], ",") {
				c.tests = append(c.tests, strings.TrimSpace(name))
			}
			m.cites = append(m.cites, c)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConformanceMapListsEveryWireField fails when a wire type, message type
// or error code of this package has no row in docs/conformance.md, and when
// a row names a field, type or code this package no longer has.
func TestConformanceMapListsEveryWireField(t *testing.T) {
	src, doc := readWireSource(t), readConformanceMap(t)
	for typ, fields := range src.fields {
		listed, ok := doc.fields[typ]
		if !ok {
			t.Errorf("docs/conformance.md has no section for wire type %s (fields %s)", typ, strings.Join(fields, ", "))
			continue
		}
		if !reflect.DeepEqual(fields, listed) {
			t.Errorf("docs/conformance.md lists %s as [%s]; the code has [%s] (same fields, same order)",
				typ, strings.Join(listed, " "), strings.Join(fields, " "))
		}
	}
	for typ := range doc.fields {
		if _, ok := src.fields[typ]; !ok {
			t.Errorf("docs/conformance.md lists type %s, which protocol/ does not declare", typ)
		}
	}
	diff := func(what string, code, listed map[string]bool) {
		for _, v := range sortedKeys(code) {
			if !listed[v] {
				t.Errorf("docs/conformance.md: %s %q has no row", what, v)
			}
		}
		for _, v := range sortedKeys(listed) {
			if !code[v] {
				t.Errorf("docs/conformance.md: %s %q is listed but protocol/ does not declare it", what, v)
			}
		}
	}
	diff("message type", src.types, doc.types)
	diff("error code", src.codes, doc.codes)
}

// TestConformanceMapCitesTestsThatExist fails when a "Shown by" cell names a
// test function its package does not have (renamed or removed).
func TestConformanceMapCitesTestsThatExist(t *testing.T) {
	doc := readConformanceMap(t)
	funcs := map[string]map[string]bool{} // package dir → test functions
	for _, c := range doc.cites {
		have, ok := funcs[c.pkg]
		if !ok {
			have = testFuncs(t, filepath.Join("..", filepath.FromSlash(c.pkg)))
			funcs[c.pkg] = have
		}
		for _, name := range c.tests {
			if !testName.MatchString(name) {
				t.Errorf("docs/conformance.md:%d: %q is not a test function name", c.line, name)
				continue
			}
			if !have[name] {
				t.Errorf("docs/conformance.md:%d: package %s has no %s", c.line, c.pkg, name)
			}
		}
	}
	if len(doc.cites) == 0 {
		t.Fatal("docs/conformance.md cites no test")
	}
}

// testFuncs lists the top-level functions of dir's _test.go files.
func testFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil {
				have[fd.Name.Name] = true
			}
		}
	}
	return have
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
