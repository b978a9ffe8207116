// Package reasondocs_test checks that docs/troubleshooting.md has a section for every condition reason
// of package v1beta1 (a package of its own: v1beta1's tests need a kube-apiserver, this one does not).
package reasondocs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// troubleshootingDoc is the runbook with a section per condition reason.
const troubleshootingDoc = "../../../docs/troubleshooting.md"

// apiDir is the package that declares the reasons.
const apiDir = ".."

// reasonConstant matches the names of the condition reasons of both kinds (Reason*, BackupReason*).
var reasonConstant = regexp.MustCompile(`^(Backup)?Reason[A-Z]`)

// reasonAnchor matches the anchors of docs/troubleshooting.md's reason sections.
var reasonAnchor = regexp.MustCompile(`<a id="(reason-[a-z0-9-]+)"></a>`)

// conditionReasons returns the value of every exported condition reason constant declared in the
// non-test files of package v1beta1, by constant name.
func conditionReasons(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(apiDir)
	if err != nil {
		t.Fatalf("read %s: %v", apiDir, err)
	}
	fset := token.NewFileSet()
	reasons := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(apiDir, e.Name()), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", e.Name(), err)
		}
		for _, decl := range f.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok && gen.Tok == token.CONST {
				addReasons(t, gen, reasons)
			}
		}
	}
	return reasons
}

// addReasons adds the exported condition reasons a const declaration declares to reasons.
func addReasons(t *testing.T, gen *ast.GenDecl, reasons map[string]string) {
	t.Helper()
	for _, spec := range gen.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if !name.IsExported() || !reasonConstant.MatchString(name.Name) {
				continue
			}
			var lit *ast.BasicLit
			if i < len(vs.Values) {
				lit, _ = vs.Values[i].(*ast.BasicLit)
			}
			if lit == nil || lit.Kind != token.STRING {
				t.Errorf("%s: give it a string literal, so that this test can read its value", name.Name)
				continue
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", name.Name, err)
			}
			reasons[name.Name] = v
		}
	}
}

// TestEveryReasonHasATroubleshootingSection fails when a condition reason users can see on an
// EtcdCluster or EtcdBackup has no section (anchor reason-<value in lower case>) in
// docs/troubleshooting.md, or when the page has an anchor of a reason that no longer exists.
func TestEveryReasonHasATroubleshootingSection(t *testing.T) {
	reasons := conditionReasons(t)
	if len(reasons) < 50 {
		t.Fatalf("found only %d reason constants: the test no longer reads conditions.go as it should", len(reasons))
	}
	doc, err := os.ReadFile(troubleshootingDoc)
	if err != nil {
		t.Fatalf("read %s: %v", troubleshootingDoc, err)
	}
	anchors := map[string]bool{}
	for _, m := range reasonAnchor.FindAllStringSubmatch(string(doc), -1) {
		anchors[m[1]] = true
	}
	want := map[string]bool{}
	names := make([]string, 0, len(reasons))
	for name := range reasons {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		anchor := "reason-" + strings.ToLower(reasons[name])
		want[anchor] = true
		if !anchors[anchor] {
			t.Errorf("%s (%q) has no section in %s: add one, with <a id=%q></a> before its heading: what it means, how to check, what to do",
				name, reasons[name], troubleshootingDoc, anchor)
		}
	}
	for anchor := range anchors {
		if !want[anchor] {
			t.Errorf("%s has a section %q of a reason the API does not declare: remove it or rename it", troubleshootingDoc, anchor)
		}
	}
}
