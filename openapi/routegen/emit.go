package main

import (
	"embed"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
)

//go:embed main.go proxyclass.go
var self embed.FS

// emitFiles are the files whose marked declarations are emitted, in this order.
var emitFiles = []string{"main.go", "proxyclass.go"}

// emitDirective marks the declarations of this file that are copied into the generated file.
const emitDirective = "//routegen:emit"

// emitted returns the source of the declarations of emitFiles marked //routegen:emit, in file
// order, with their doc comments and without the directive.
func emitted() (string, error) {
	var out strings.Builder
	for _, name := range emitFiles {
		src, err := self.ReadFile(name)
		if err != nil {
			return "", err
		}
		if err := emitFrom(&out, name, src); err != nil {
			return "", err
		}
	}
	return out.String(), nil
}

// emitFrom appends the marked declarations of one file to out.
func emitFrom(out *strings.Builder, name string, src []byte) error {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return err
	}
	for _, decl := range file.Decls {
		var doc *ast.CommentGroup
		switch d := decl.(type) {
		case *ast.GenDecl:
			doc = d.Doc
		case *ast.FuncDecl:
			doc = d.Doc
		}
		if doc == nil || !slices.ContainsFunc(doc.List, func(c *ast.Comment) bool { return c.Text == emitDirective }) {
			continue
		}
		text := string(src[fset.Position(doc.Pos()).Offset:fset.Position(decl.End()).Offset])
		text = strings.Replace(text, "//\n"+emitDirective+"\n", "", 1)
		text = strings.Replace(text, emitDirective+"\n", "", 1)
		out.WriteString(text)
		out.WriteString("\n\n")
	}
	return nil
}
