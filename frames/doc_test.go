package frames

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestEveryExportedNameHasADocComment parses the package and checks that every exported type,
// function, method, constant, variable and struct field has a doc comment: the AsyncAPI
// document uses them as descriptions.
func TestEveryExportedNameHasADocComment(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	if len(files) == 0 {
		t.Fatal("no source files")
	}
	hasPkgDoc := false
	for name, file := range files {
		if file.Doc != nil {
			hasPkgDoc = true
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
					continue
				}
				if d.Doc == nil {
					t.Errorf("%s: func %s has no doc comment", name, d.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if s.Doc == nil && d.Doc == nil {
							t.Errorf("%s: type %s has no doc comment", name, s.Name)
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									if n.IsExported() && fld.Doc == nil {
										t.Errorf("%s: field %s.%s has no doc comment", name, s.Name, n)
									}
								}
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									if n.IsExported() && m.Doc == nil {
										t.Errorf("%s: method %s.%s has no doc comment", name, s.Name, n)
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && !(len(d.Specs) == 1 && d.Doc != nil) {
								t.Errorf("%s: %s has no doc comment", name, n)
							}
						}
					}
				}
			}
		}
	}
	if !hasPkgDoc {
		t.Error("no package doc comment")
	}
}

func exportedRecv(r *ast.FieldList) bool {
	if len(r.List) == 0 {
		return false
	}
	typ := r.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
