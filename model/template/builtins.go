package template

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// The engine's environment with hone's extensions, built once and shared
// (it is only read while rendering).
var (
	envOnce sync.Once
	env     *exec.Environment
)

func environment() *exec.Environment {
	envOnce.Do(func() { env = newEnvironment() })
	return env
}

// newEnvironment copies gonja's built-ins and replaces, through its
// extension points (filter, method and control-structure sets, global
// context), what chat templates need to behave as under Python's Jinja2
// with transformers' settings.
func newEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	must(filters.Replace("tojson", filterToJSON))
	must(filters.Replace("trim", filterTrim))
	must(filters.Replace("items", filterItems))
	must(filters.Replace("string", filterString))
	must(filters.Replace("default", filterDefault))
	must(filters.Replace("title", filterTitle))
	must(filters.Replace("dictsort", filterDictsort))
	must(filters.Replace("reverse", filterReverse))
	must(filters.Replace("d", filterDefault))
	// Filters that build lists return Python-indexable lists.
	for _, name := range []string{"batch", "list", "map", "reject", "rejectattr", "select",
		"selectattr", "slice", "sort", "unique"} {
		if f, ok := filters.Get(name); ok {
			must(filters.Replace(name, listResult(f)))
		}
	}

	structures := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
	// No file access, as transformers' from_string environment has no
	// loader: the template cannot read other files.
	for _, name := range []string{"extends", "include", "import", "from"} {
		if p, ok := structures.Get(name); ok && p != nil {
			must(structures.Replace(name, noFiles(name)))
		}
	}
	// transformers' AssistantTracker extension: {% generation %} marks
	// assistant text and renders its body unchanged.
	must(structures.Register("generation", generationParser))
	// Macros recurse with a depth limit (Python stops at its recursion
	// limit; Go would exhaust the stack and crash the process).
	if orig, ok := structures.Get("macro"); ok {
		must(structures.Replace("macro", boundedMacroParser(orig)))
	}

	methods := builtins.Methods
	methods.Str = strMethods()
	methods.Dict = exec.NewMethodSet(map[string]exec.Method[map[string]any]{
		"items":  dictMethodItems,
		"keys":   dictMethodKeys,
		"values": dictMethodValues,
		"get":    dictMethodGet,
	})

	tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
	must(tests.Replace("defined", testDefined))
	must(tests.Replace("undefined", func(c *exec.Context, in *exec.Value, p *exec.VarArgs) (bool, error) {
		d, err := testDefined(c, in, p)
		return !d, err
	}))

	// Undefined is iterable (an empty iteration), None is not.
	// Jinja's sequence: anything with a length and items (str, list, dict).
	must(tests.Replace("sequence", func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		return in.IsDict() || in.IsList() || in.IsString(), nil
	}))
	// Only None is none (Undefined is not).
	must(tests.Replace("none", func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		return isNone(in), nil
	}))
	must(tests.Replace("iterable", func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		return in.IsNil() || in.IsDict() || in.IsList() || in.IsString(), nil
	}))

	globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	globals.Set("range", rangeFunction)
	globals.Set("none", jsonNull)

	return &exec.Environment{
		Context:           globals,
		Filters:           filters,
		Tests:             tests,
		ControlStructures: structures,
		Methods:           methods,
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys).
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 {
		return exec.AsValue(errors.New("tojson() takes keyword arguments only"))
	}
	o := defaultJSON
	ensureASCII := false
	for k, v := range params.KwArgs {
		switch k {
		case "indent":
			switch {
			case noneOrUndefined(v):
			case v.IsInteger():
				o.pretty, o.indent = true, strings.Repeat(" ", max(v.Integer(), 0))
			case v.IsString():
				o.pretty, o.indent = true, v.String()
			default:
				return exec.AsValue(errors.New("tojson: indent must be an integer or a string"))
			}
		case "sort_keys":
			o.sortKeys = v.IsTrue()
		case "ensure_ascii":
			ensureASCII = v.IsTrue()
		case "separators":
		default:
			return exec.AsValue(fmt.Errorf("tojson() got an unexpected keyword argument '%s'", k))
		}
	}
	if o.pretty {
		o.itemSep = ","
	}
	if sep, ok := params.KwArgs["separators"]; ok && !noneOrUndefined(sep) {
		if !sep.IsList() || sep.Len() != 2 || !sep.Index(0).IsString() || !sep.Index(1).IsString() {
			return exec.AsValue(errors.New("tojson: separators must be a pair of strings"))
		}
		o.itemSep, o.keySep = sep.Index(0).String(), sep.Index(1).String()
	}
	var sb strings.Builder
	if err := toJSON(&sb, in, &o, 0); err != nil {
		return exec.AsValue(err)
	}
	out := sb.String()
	if ensureASCII {
		out = asciiEscape(out)
	}
	return exec.AsSafeValue(out)
}

// asciiEscape turns non-ASCII characters into \uXXXX escapes (surrogate
// pairs above U+FFFF), as json.dumps(ensure_ascii=True) does.
func asciiEscape(s string) string {
	var sb strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			sb.WriteRune(r)
		case r < 0x10000:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			r -= 0x10000
			fmt.Fprintf(&sb, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		}
	}
	return sb.String()
}

// listResult wraps a filter so a list it returns is a pyList.
func listResult(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		out := f(e, in, params)
		if out.IsError() || !out.IsList() {
			return out
		}
		return exec.AsValue(asList(out.Interface()))
	}
}

// testDefined: None is defined, only Undefined (nil) is not.
func testDefined(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return !in.IsError() && !in.IsNil(), nil
}

// filterDefault is Jinja's default(value, default_value=”, boolean=False):
// it replaces Undefined (and, with boolean, any false value), not None.
func filterDefault(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	def := exec.AsValue("")
	if len(params.Args) > 0 {
		def = params.Args[0]
	} else if v, ok := params.KwArgs["default_value"]; ok {
		def = v
	}
	boolean := len(params.Args) > 1 && params.Args[1].IsTrue()
	if v, ok := params.KwArgs["boolean"]; ok {
		boolean = v.IsTrue()
	}
	if in.IsError() || in.IsNil() || (boolean && !in.IsTrue()) {
		return def
	}
	return in
}

// filterTitle is Jinja's title: words begin after whitespace, '-', '(',
// '{', '[' or '<'; each gets its first character upper-cased and the rest
// lower-cased.
func filterTitle(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	s := pyStr(in)
	var sb strings.Builder
	start := true
	for _, r := range s {
		if pyIsSpace(r) || strings.ContainsRune("-({[<", r) {
			sb.WriteRune(r)
			start = true
			continue
		}
		if start {
			sb.WriteString(strings.ToUpper(string(r)))
			start = false
		} else {
			sb.WriteString(strings.ToLower(string(r)))
		}
	}
	return exec.AsValue(sb.String())
}

// filterDictsort is Jinja's dictsort(case_sensitive=False, by='key',
// reverse=False): the (key, value) pairs sorted.
func filterDictsort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("dictsort requires a mapping"))
	}
	caseSensitive := arg(params, 0, "case_sensitive")
	by := arg(params, 1, "by")
	reverse := arg(params, 2, "reverse")
	byValue := by != nil && by.String() == "value"
	if by != nil && !byValue && by.String() != "key" {
		//lint:ignore ST1005 Jinja's own message, word for word (the goldens compare it)
		return exec.AsValue(errors.New("You can only sort by either \"key\" or \"value\""))
	}
	items := append([]*exec.Pair(nil), dictItems(in)...)
	key := func(p *exec.Pair) *exec.Value {
		if byValue {
			return p.Value
		}
		return p.Key
	}
	less := func(a, b *exec.Value) bool {
		if a.IsNumber() && b.IsNumber() {
			return a.Float() < b.Float()
		}
		x, y := pyStr(a), pyStr(b)
		if caseSensitive == nil || !caseSensitive.IsTrue() {
			x, y = strings.ToLower(x), strings.ToLower(y)
		}
		return x < y
	}
	sort.SliceStable(items, func(i, j int) bool {
		if reverse != nil && reverse.IsTrue() {
			return less(key(items[j]), key(items[i]))
		}
		return less(key(items[i]), key(items[j]))
	})
	out := make(pyList, len(items))
	for i, p := range items {
		out[i] = pyList{p.Key.Interface(), p.Value.Interface()}
	}
	return exec.AsValue(out)
}

// filterReverse is Jinja's reverse: a reversed string, or the items of a
// sequence in reverse order (a new list; the input is not changed).
func filterReverse(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	switch {
	case in.IsError():
		return in
	case in.IsString():
		r := []rune(in.String())
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return exec.AsValue(string(r))
	case in.IsList():
		n := in.Len()
		out := make(pyList, n)
		for i := range n {
			out[n-1-i] = in.Index(i).Interface()
		}
		return exec.AsValue(out)
	case in.IsDict():
		items := dictItems(in)
		out := make(pyList, len(items))
		for i, p := range items {
			out[len(items)-1-i] = p.Key.Interface()
		}
		return exec.AsValue(out)
	}
	return exec.AsValue(fmt.Errorf("argument to reversed() must be a sequence"))
}

// filterTrim is Jinja's trim: str(value).strip(chars).
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	chars := params.GetKeywordArgument("chars", nil)
	if len(params.Args) > 0 {
		chars = params.Args[0]
	}
	s := pyStr(in)
	if noneOrUndefined(chars) {
		return exec.AsValue(pyStrip(s))
	}
	return exec.AsValue(strings.Trim(s, chars.String()))
}

// filterString is Jinja's string: str(value) (lists and dicts as their
// repr, None as "None").
func filterString(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	return exec.AsValue(pyStr(in))
}

// filterItems is Jinja's items: the (key, value) pairs of a mapping in
// its order; an undefined value gives none.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsNil() {
		return exec.AsValue(pyList{})
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("items requires a mapping"))
	}
	return exec.AsValue(pairList(in))
}

// pairList is the list of [key, value] pairs of a dict (Python's
// dict.items(), unpacked by for loops).
func pairList(in *exec.Value) pyList {
	items := dictItems(in)
	out := make(pyList, len(items))
	for i, p := range items {
		out[i] = pyList{p.Key.Interface(), p.Value.Interface()}
	}
	return out
}

// The dict methods act on the dict itself (selfValue), not the unordered
// Go map the engine hands them, so key order is Python's.
func dictMethodItems(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if err := args.Take(); err != nil {
		return nil, exec.ErrInvalidCall(err)
	}
	return pairList(self), nil
}

func dictMethodKeys(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if err := args.Take(); err != nil {
		return nil, exec.ErrInvalidCall(err)
	}
	items := dictItems(self)
	out := make(pyList, len(items))
	for i, p := range items {
		out[i] = p.Key.Interface()
	}
	return out, nil
}

func dictMethodValues(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if err := args.Take(); err != nil {
		return nil, exec.ErrInvalidCall(err)
	}
	items := dictItems(self)
	out := make(pyList, len(items))
	for i, p := range items {
		out[i] = p.Value.Interface()
	}
	return out, nil
}

func dictMethodGet(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.Args) < 1 || len(args.Args) > 2 || len(args.KwArgs) > 0 {
		return nil, exec.ErrInvalidCall(errors.New("get() takes 1 or 2 positional arguments"))
	}
	key := args.Args[0]
	for _, p := range dictItems(self) {
		if p.Key.EqualValueTo(key) {
			return p.Value.Interface(), nil
		}
	}
	if len(args.Args) == 2 {
		return args.Args[1].Interface(), nil
	}
	return jsonNull, nil
}

// maxRange is the sandbox's MAX_RANGE.
const maxRange = 100000

// rangeFunction is Python's range as a list (the engine's own streams
// from a goroutine that leaks when a loop breaks early).
func rangeFunction(_ *exec.Evaluator, params *exec.VarArgs) (any, error) {
	var bounds [3]int
	n := len(params.Args)
	if n < 1 || n > 3 || len(params.KwArgs) > 0 {
		return nil, errors.New("range expected 1 to 3 integer arguments")
	}
	for i, a := range params.Args {
		if !a.IsInteger() {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a))
		}
		bounds[i] = a.Integer()
	}
	start, stop, step := 0, bounds[0], 1
	if n >= 2 {
		start, stop = bounds[0], bounds[1]
	}
	if n == 3 {
		step = bounds[2]
	}
	if step == 0 {
		return nil, errors.New("range() arg 3 must not be zero")
	}
	var out pyList
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) >= maxRange {
			//lint:ignore ST1005 Jinja's own message, word for word (the goldens compare it)
			return nil, fmt.Errorf("Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
		}
		out = append(out, i)
	}
	if out == nil {
		out = pyList{}
	}
	return out, nil
}

// typeName is Python's type name of a value.
func typeName(v *exec.Value) string {
	switch {
	case noneOrUndefined(v):
		return "NoneType"
	case v.IsBool():
		return "bool"
	case v.IsInteger():
		return "int"
	case v.IsFloat():
		return "float"
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	}
	return v.Val.Type().String()
}

// noFiles replaces a control structure that would read another template.
func noFiles(name string) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		return nil, fmt.Errorf("chat templates cannot use '%s': there is no template loader", name)
	}
}

// generationBlock renders the body of {% generation %}...{% endgeneration %}.
type generationBlock struct {
	location *tokens.Token
	body     *nodes.Wrapper
}

func (g *generationBlock) Position() *tokens.Token { return g.location }

func (g *generationBlock) String() string {
	return fmt.Sprintf("GenerationControlStructure(Line=%d Col=%d)", g.location.Line, g.location.Col)
}

func (g *generationBlock) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return r.ExecuteWrapper(g.body)
}

func generationParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	g := &generationBlock{location: p.Current()}
	body, endArgs, err := p.WrapUntil("endgeneration")
	if err != nil {
		return nil, err
	}
	if !args.End() || !endArgs.End() {
		return nil, errors.New("generation takes no arguments")
	}
	g.body = body
	return g, nil
}

// maxMacroDepth bounds nested macro calls in one render.
const maxMacroDepth = 100

// depthKey names the per-render macro depth counter in the context.
const depthKey = "__hone_macro_depth"

// boundedMacroParser parses a macro as gonja does and defines it with a
// depth-counting wrapper.
func boundedMacroParser(orig parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := orig(p, args)
		if err != nil {
			return nil, err
		}
		m, ok := cs.(*controlStructures.MacroControlStructure)
		if !ok {
			return cs, nil
		}
		return &boundedMacro{m}, nil
	}
}

type boundedMacro struct {
	*controlStructures.MacroControlStructure
}

func (b *boundedMacro) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	fn, err := exec.MacroNodeToFunc(b.Macro, r)
	if err != nil {
		return fmt.Errorf("unable to parse macro '%s': %w", b.Name, err)
	}
	counter, _ := r.Environment.Context.Get(depthKey)
	depth, _ := counter.(*int)
	if depth == nil {
		depth = new(int)
	}
	r.Environment.Context.Set(b.Name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if *depth >= maxMacroDepth {
			return exec.AsValue(errors.New("maximum recursion depth exceeded"))
		}
		*depth++
		defer func() { *depth-- }()
		return fn(params)
	}))
	return nil
}

// strftime formats t with Python's strftime directives (the C locale).
func strftime(t time.Time, format string) string {
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'a':
			sb.WriteString(t.Format("Mon"))
		case 'A':
			sb.WriteString(t.Format("Monday"))
		case 'b', 'h':
			sb.WriteString(t.Format("Jan"))
		case 'B':
			sb.WriteString(t.Format("January"))
		case 'd':
			fmt.Fprintf(&sb, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&sb, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&sb, "%02d", int(t.Month()))
		case 'y':
			fmt.Fprintf(&sb, "%02d", t.Year()%100)
		case 'Y':
			sb.WriteString(strconv.Itoa(t.Year()))
		case 'H':
			fmt.Fprintf(&sb, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&sb, "%02d", h)
		case 'p':
			sb.WriteString(t.Format("PM"))
		case 'M':
			fmt.Fprintf(&sb, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&sb, "%02d", t.Second())
		case 'f':
			fmt.Fprintf(&sb, "%06d", t.Nanosecond()/1000)
		case 'j':
			fmt.Fprintf(&sb, "%03d", t.YearDay())
		case 'w':
			sb.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			sb.WriteString(strconv.Itoa(wd))
		case 'Z':
			name, _ := t.Zone()
			sb.WriteString(name)
		case 'z':
			sb.WriteString(t.Format("-0700"))
		case 'D':
			sb.WriteString(t.Format("01/02/06"))
		case 'F':
			sb.WriteString(t.Format("2006-01-02"))
		case 'T':
			sb.WriteString(t.Format("15:04:05"))
		case 'R':
			sb.WriteString(t.Format("15:04"))
		case 'c':
			sb.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'x':
			sb.WriteString(t.Format("01/02/06"))
		case 'X':
			sb.WriteString(t.Format("15:04:05"))
		case 'n':
			sb.WriteByte('\n')
		case 't':
			sb.WriteByte('\t')
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			sb.WriteByte(format[i])
		}
	}
	return sb.String()
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// pyStrip is Python's str.strip() without arguments.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }
