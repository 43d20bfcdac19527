package dialect

// The helpers of the tests of the package, for its external tests
// (templates_test.go).
var (
	Splits    = splits
	ParseAll  = parseAll
	FmtCalls  = fmtCalls
	JSONEqual = jsonEqual
	MustJSON  = mustJSON
)
