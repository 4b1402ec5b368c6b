package readers

// WithCSVUnitBytes cuts uncompressed CSV files into units of about n bytes, so tests can split
// small files anywhere.
var WithCSVUnitBytes = withCSVUnitBytes
