// Command benchtable renders the README's measured table from `make bench`'s JSON (package
// benchresult).
//
//	go run ./hack/benchtable -in bin/bench/sidebyside.json   copy it to docs/bench/sidebyside.json and rewrite README.md's table
//	go run ./hack/benchtable -check                          fail when README.md's table is not docs/bench/sidebyside.json's (make verify)
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/etcdkit/etcd-operator/internal/benchresult"
)

func main() {
	in := flag.String("in", "", "a fresh `make bench` result to copy to -json first (empty: use -json as it is)")
	jsonPath := flag.String("json", "docs/bench/sidebyside.json", "the committed result the table is rendered from")
	readme := flag.String("readme", "README.md", "the Markdown file holding the table between its markers")
	check := flag.Bool("check", false, "only check that the table is current; exit 1 when it is not")
	flag.Parse()
	if err := run(*in, *jsonPath, *readme, *check); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(in, jsonPath, readme string, check bool) error {
	if in != "" {
		r, err := benchresult.Read(in)
		if err != nil {
			return err
		}
		if err := r.Write(jsonPath); err != nil {
			return err
		}
	}
	r, err := benchresult.Read(jsonPath)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	out, err := benchresult.Splice(string(doc), r.Table())
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	if bytes.Equal(doc, []byte(out)) {
		return nil
	}
	if check {
		return fmt.Errorf("the measured table in %s is not the one %s renders: run `go run ./hack/benchtable` (or `make bench` for new figures) and commit both", readme, jsonPath)
	}
	return os.WriteFile(readme, []byte(out), 0o644)
}
