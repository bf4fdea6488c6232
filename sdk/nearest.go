package sdk

import (
	"reflect"
	"strings"
)

// Nearest returns the known word closest to word (by edit distance, ignoring case), or "" when
// none is close enough to be a likely typo. Plugins can use it to name the key a user meant.
func Nearest(word string, known []string) string {
	best, bestD := "", -1
	w := strings.ToLower(word)
	for _, k := range known {
		cand := strings.ToLower(k)
		d := editDistance(w, cand)
		// A dotted key also matches on its last part: `seeds` is near `contract.seeds`.
		if i := strings.LastIndexByte(cand, '.'); i >= 0 && !strings.Contains(w, ".") {
			d = min(d, editDistance(w, cand[i+1:]))
		}
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > max(2, len(word)/3) {
		return ""
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (with adjacent transpositions: `devcie`).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// jsonKeys lists the JSON keys a struct decodes (for messages about unknown keys).
func jsonKeys(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			// An embedded struct's keys are the outer struct's, as encoding/json reads them.
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonKeys(reflect.New(ft).Interface())...)
				continue
			}
		}
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
