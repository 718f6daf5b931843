import FuzzDriver

// The parsers of the libraries a field app takes: geometry codecs, JSON, where clauses and the
// sync wire (scripts/fuzz all).
try runFuzzer(targets: coreTargets)
