// Package docs_test keeps the pages under docs/ true to the code: every test
// a page names as the proof of a promise exists, and every path it names.
package docs_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pages name tests as the proof of what they say.
var pages = []string{"guarantees.md", "development.md", "testing.md", "architecture.md"}

var (
	// A test named in a page, in backticks: TestName, pkg.TestName or
	// dir/pkg.TestName; a trailing * stands for every test with that prefix.
	namedTest = regexp.MustCompile("`((?:[a-z][a-z0-9_]*/)*[a-z][a-z0-9_]*\\.)?((?:Test|Fuzz)[A-Za-z0-9_]*)(\\*?)`")
	// A test or fuzz target as Go declares it.
	declaredTest = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)
)

// Every test a page names exists as a func in a *_test.go file: in the
// package the name is qualified with, or, for a bare name after a qualified
// one on the same line, in that package too. A renamed or deleted test
// leaves its promise without proof, and this fails.
func TestEveryTestNamedInTheDocsExists(t *testing.T) {
	t.Parallel()
	declared := declaredTests(t, "..")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		named := 0
		for i, line := range strings.Split(string(b), "\n") {
			pkg := ""
			for _, m := range namedTest.FindAllStringSubmatch(line, -1) {
				if m[1] != "" {
					pkg = strings.TrimSuffix(m[1], ".")
				}
				named++
				name, prefix := m[2], m[3] == "*"
				if !exists(declared, pkg, name, prefix) {
					where := "the repository"
					if pkg != "" {
						where = "package " + pkg
					}
					t.Errorf("%s:%d names %s%s, which no *_test.go file in %s declares", page, i+1, m[2], m[3], where)
				}
			}
		}
		if page == "guarantees.md" && named < 100 {
			t.Errorf("guarantees.md names %d tests; the pattern that finds them has probably stopped matching", named)
		}
	}
}

// declaredTests maps each test and fuzz target declared under root to the
// directories (slash-separated, relative to root) that declare it.
func declaredTests(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "out" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		for _, m := range declaredTest.FindAllSubmatch(b, -1) {
			out[string(m[1])] = append(out[string(m[1])], filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// exists reports whether name (or, with prefix, a test starting with it) is
// declared in pkg: a directory path (cmd/shipnotify) or a package's name
// (faults for internal/tools/faults); anywhere when pkg is empty.
func exists(declared map[string][]string, pkg, name string, prefix bool) bool {
	inPkg := func(dir string) bool {
		if pkg == "" {
			return true
		}
		if strings.Contains(pkg, "/") {
			return dir == pkg
		}
		return path.Base(dir) == pkg
	}
	for test, dirs := range declared {
		if test == name || prefix && strings.HasPrefix(test, name) {
			if slices.ContainsFunc(dirs, inPkg) {
				return true
			}
		}
	}
	return false
}

// A repository path a page names, in backticks: a file with an extension,
// or a directory ending in /. Build output (out/, .dev/) is not named here.
var namedPath = regexp.MustCompile("`((?:[a-z][a-z0-9_.-]*/)+(?:[A-Za-z0-9_.-]+\\.[a-z]+)?)`")

// Every file and directory the pages (and the README) name as where
// something lives exists: a package moved or a file renamed leaves the
// recipe pointing nowhere, and this fails.
func TestEveryPathNamedInTheDocsExists(t *testing.T) {
	t.Parallel()
	for _, page := range append(slices.Clone(pages), "../README.md") {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range namedPath.FindAllStringSubmatch(line, -1) {
				p := m[1]
				if strings.HasPrefix(p, "out/") || strings.HasPrefix(p, ".dev/") || strings.Contains(p, "..") || strings.Contains(p, "NN") {
					continue
				}
				seen++
				if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(p))); err != nil {
					t.Errorf("%s:%d names %s, which the repository does not hold", page, i+1, p)
				}
			}
		}
		if seen == 0 {
			t.Errorf("%s names no path; the pattern that finds them has probably stopped matching", page)
		}
	}
}

// Every row of architecture.md's lease table (every lease, claim, lock and
// wait in the system) names the test in which the longest work under it
// outlives it safely; TestEveryTestNamedInTheDocsExists checks that test
// exists.
func TestEveryLeaseRowNamesATest(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	start := strings.Index(page, "## Leases, claims, locks and waits")
	if start < 0 {
		t.Fatal("architecture.md has no lease table")
	}
	section := page[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| **") {
			continue
		}
		rows++
		cells := strings.Split(line, "|")
		if last := cells[len(cells)-2]; !namedTest.MatchString(last) {
			t.Errorf("the lease row %q names no test in its last column", strings.TrimSpace(cells[1]))
		}
	}
	if rows < 10 {
		t.Errorf("the lease table has %d rows; its rows are no longer found", rows)
	}
}

// A code reference a page makes: a file in backticks followed by a name
// in backticks, `mirror/deliveries.go` `Store.ClaimDelivery`: the name is a
// function, type, constant or variable the file declares, or Type.Name, a
// method or field of a type it declares; in a .sql file, a name it holds.
var codeReference = regexp.MustCompile("`((?:[a-z][a-z0-9_.-]*/)+[A-Za-z0-9_.-]+\\.(?:go|sql))`\\s+`([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?`")

// Every code reference the pages make resolves: the file holds the name,
// so a recipe's "open this function" never points at one renamed or moved.
func TestEveryCodeReferenceInTheDocsResolves(t *testing.T) {
	t.Parallel()
	for _, page := range append(slices.Clone(pages), "../README.md") {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range codeReference.FindAllStringSubmatchIndex(string(b), -1) {
			file, name, member := string(b[m[2]:m[3]]), string(b[m[4]:m[5]]), ""
			if m[6] >= 0 {
				member = string(b[m[6]:m[7]])
			}
			line := 1 + strings.Count(string(b[:m[0]]), "\n")
			src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
			if err != nil {
				t.Errorf("%s:%d names %s, which the repository does not hold", page, line, file)
				continue
			}
			if !declares(string(src), strings.HasSuffix(file, ".sql"), name, member) {
				ref := name
				if member != "" {
					ref += "." + member
				}
				t.Errorf("%s:%d names %s in %s, which declares no such name", page, line, ref, file)
			}
		}
	}
}

// declares reports whether Go source src declares name (or, with member,
// a method or field member of type name); for SQL, whether it holds name.
func declares(src string, sql bool, name, member string) bool {
	has := func(pattern string) bool { return regexp.MustCompile(pattern).MatchString(src) }
	q := regexp.QuoteMeta
	if sql {
		return member == "" && has(`\b`+q(name)+`\b`)
	}
	if member != "" {
		// A method is declared in the file named, its type maybe in
		// another of the package's; a field, with its type.
		if has(`(?m)^func \(\w+ \*?` + q(name) + `(?:\[[^\]]*\])?\) ` + q(member) + `\(`) {
			return true
		}
		return has(`(?m)^(?:type\s+|\t)`+q(name)+`\s+(?:struct|interface)`) &&
			(has(`(?m)^\t+`+q(member)+`(?:,\s*\w+)*\s+[^=\s]`) || has(`(?m)^\t+\w+(?:,\s*\w+)*,\s*`+q(member)+`\s+[^=\s]`))
	}
	return has(`(?m)^func (?:\([^)]*\) )?`+q(name)+`(?:\[[^\]]*\])?\(`) ||
		has(`(?m)^(?:type|var|const)\s+`+q(name)+`\b`) ||
		has(`(?m)^\t`+q(name)+`(?:\s*,\s*\w+)*\s*(?:=|\s+[A-Za-z*\[])`)
}
