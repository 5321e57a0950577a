package main

// Regressions of the Sarama quirks fencecheck found (README.md, "Quirks seen"; adapter.go's
// errTransactionalIDNotFound and errText): each test passes while the quirk is there and fails,
// saying so, once a Sarama release fixes it; the adapter's own messages are checked beside them.
//
//	cd adapters/sarama && go test ./...        (make test-adapters)

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

const saramaModule = "github.com/IBM/sarama"

// PRODUCER_FENCED (90): a constant, no text.
func TestQuirkSaramaProducerFencedHasNoText(t *testing.T) {
	v := saramaVersion()
	if int16(sarama.ErrProducerFenced) != 90 {
		t.Fatalf("Sarama %s: ErrProducerFenced is %d, not 90", v, int16(sarama.ErrProducerFenced))
	}
	const want = "Unknown error, how did this happen? Error code = 90"
	if got := sarama.KError(90).Error(); got != want {
		t.Fatalf("Sarama %s now has a text for PRODUCER_FENCED (90): KError(90).Error() = %q, not %q. "+
			"The quirk is fixed: errText keeps Sarama's text after the name now; update README.md's "+
			"\"Quirks seen\" and this regression", v, got, want)
	}
}

// TRANSACTIONAL_ID_NOT_FOUND (105): no constant (and no text).
func TestQuirkSaramaNoTransactionalIDNotFound(t *testing.T) {
	v := saramaVersion()
	const want = "Unknown error, how did this happen? Error code = 105"
	if got := sarama.KError(105).Error(); got != want {
		t.Errorf("Sarama %s now has a text for TRANSACTIONAL_ID_NOT_FOUND (105): KError(105).Error() = %q, not %q",
			v, got, want)
	}

	// Whether a constant exists is a question about Sarama's source: its KError constants, from
	// the module directory the go command uses for this build.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", saramaModule).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		t.Fatalf("go list -m %s: %v", saramaModule, err)
	}
	byValue := kErrorConstants(t, strings.TrimSpace(string(out)))
	// The parse must see the table: ErrProducerFenced is 90 (checked above through the package).
	if !contains(byValue[90], "ErrProducerFenced") {
		t.Fatalf("Sarama %s: no KError constant ErrProducerFenced = 90 found in its source (found %d values): "+
			"this test no longer reads Sarama's constants; fix kErrorConstants", v, len(byValue))
	}
	if names := byValue[105]; len(names) > 0 {
		t.Fatalf("Sarama %s now has a constant for TRANSACTIONAL_ID_NOT_FOUND (105): %s. The quirk is fixed: "+
			"use it for errTransactionalIDNotFound in adapter.go (now sarama.KError(105)), update README.md and "+
			"this regression", v, strings.Join(names, ", "))
	}
}

// The adapter's messages name the codes Sarama has no text for.
func TestAdapterNamesProducerFenced(t *testing.T) {
	for _, err := range []error{
		sarama.ErrProducerFenced,
		fmt.Errorf("commit: %w", sarama.ErrProducerFenced), // as the transaction manager wraps it
	} {
		got := errText(err)
		if !strings.Contains(got, "PRODUCER_FENCED (Kafka error 90)") {
			t.Errorf("errText(%q) = %q: does not name PRODUCER_FENCED (Kafka error 90)", err, got)
		}
		if strings.Contains(got, "Unknown error") {
			t.Errorf("errText(%q) = %q: still says Sarama's \"Unknown error\"", err, got)
		}
		if k := kindOf(err); k != kindFenced {
			t.Errorf("kindOf(%q) = %q, want %q", err, k, kindFenced)
		}
	}
	if got := errText(errTransactionalIDNotFound); !strings.Contains(got, "TRANSACTIONAL_ID_NOT_FOUND (Kafka error 105)") {
		t.Errorf("errText(KError(105)) = %q: does not name TRANSACTIONAL_ID_NOT_FOUND (Kafka error 105)", got)
	}
}

// kErrorConstants maps each value to the names of the KError constants declared with it in the
// non-test Go files of dir (package sarama), as integer literals or KError(literal) conversions.
// A constant given any other way (iota, an expression) fails the test rather than being missed.
func kErrorConstants(t *testing.T, dir string) map[int64][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in Sarama's module directory %q (%v)", dir, err)
	}
	fset := gotoken.NewFileSet()
	byValue := map[int64][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "KError") {
			continue
		}
		af, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		if af.Name.Name != "sarama" {
			continue
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != gotoken.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				typed := isIdent(vs.Type, "KError")
				for i, name := range vs.Names {
					var val ast.Expr
					if i < len(vs.Values) {
						val = vs.Values[i]
					}
					if c, ok := val.(*ast.CallExpr); ok && isIdent(c.Fun, "KError") && len(c.Args) == 1 {
						typed, val = true, c.Args[0]
					}
					if !typed {
						continue
					}
					n, ok := intLiteral(val)
					if !ok {
						t.Fatalf("%s: KError constant %s is not an integer literal: kErrorConstants cannot "+
							"read it; teach it (e.g. with go/types)", fset.Position(name.Pos()), name.Name)
					}
					byValue[n] = append(byValue[n], name.Name)
				}
			}
		}
	}
	return byValue
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func intLiteral(e ast.Expr) (int64, bool) {
	neg := false
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == gotoken.SUB {
		neg, e = true, u.X
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != gotoken.INT {
		return 0, false
	}
	n, err := strconv.ParseInt(lit.Value, 0, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
