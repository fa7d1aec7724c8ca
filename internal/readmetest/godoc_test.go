package readmetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestGodocShowsNoUnexportedNames: the declaration godoc shows for an exported type (an
// array's length, a map's or a func's types, an exported field's type) names nothing
// unexported, which a reader could not look up — Shares once read [numCriticalities]float64.
func TestGodocShowsNoUnexportedNames(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if base := d.Name(); rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "internal" || base == "cmd" || base == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() {
					continue
				}
				for _, id := range shownIdents(ts.Type) {
					if !id.IsExported() && !predeclared[id.Name] {
						t.Errorf("%s: type %s shows the unexported name %s in its godoc", fset.Position(id.Pos()), ts.Name.Name, id.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var predeclared = map[string]bool{"bool": true, "byte": true, "complex64": true, "complex128": true, "error": true,
	"float32": true, "float64": true, "int": true, "int8": true, "int16": true, "int32": true, "int64": true, "rune": true,
	"string": true, "uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true, "uintptr": true,
	"any": true, "comparable": true, "true": true, "false": true, "iota": true, "nil": true}

// shownIdents returns the identifiers of a type expression that godoc prints: not those of
// unexported struct fields or interface methods, which it hides, nor field and method
// names, nor the package part of a qualified name.
func shownIdents(e ast.Expr) []*ast.Ident {
	var out []*ast.Ident
	var walk func(ast.Node)
	walk = func(n ast.Node) {
		switch n := n.(type) {
		case nil:
		case *ast.Ident:
			out = append(out, n)
		case *ast.SelectorExpr: // pkg.Name: exported by construction
		case *ast.StructType:
			for _, f := range n.Fields.List {
				if len(f.Names) == 0 && !embeddedExported(f.Type) || len(f.Names) > 0 && !f.Names[0].IsExported() {
					continue // hidden: "contains filtered or unexported fields"
				}
				walk(f.Type)
			}
		case *ast.InterfaceType:
			for _, m := range n.Methods.List {
				if len(m.Names) == 0 || m.Names[0].IsExported() {
					walk(m.Type)
				}
			}
		case *ast.FuncType:
			for _, l := range []*ast.FieldList{n.TypeParams, n.Params, n.Results} {
				if l != nil {
					for _, f := range l.List {
						walk(f.Type)
					}
				}
			}
		case *ast.ArrayType:
			walk(n.Len)
			walk(n.Elt)
		case *ast.MapType:
			walk(n.Key)
			walk(n.Value)
		case *ast.ChanType:
			walk(n.Value)
		case *ast.StarExpr:
			walk(n.X)
		case *ast.Ellipsis:
			walk(n.Elt)
		case *ast.IndexExpr:
			walk(n.X)
			walk(n.Index)
		case *ast.IndexListExpr:
			walk(n.X)
			for _, i := range n.Indices {
				walk(i)
			}
		case *ast.BinaryExpr:
			walk(n.X)
			walk(n.Y)
		case *ast.ParenExpr:
			walk(n.X)
		}
	}
	walk(e)
	return out
}

// embeddedExported reports whether an embedded field's type (T, *T, pkg.T) is exported.
func embeddedExported(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.StarExpr:
		return embeddedExported(e.X)
	case *ast.Ident:
		return e.IsExported()
	case *ast.SelectorExpr:
		return e.Sel.IsExported()
	case *ast.IndexExpr:
		return embeddedExported(e.X)
	}
	return true
}
