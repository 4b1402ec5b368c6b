package schemamatch

// ForSource returns a plan that does exactly what p does but names another file: in errors, and in
// the rescue column's "_file_path". It costs a shallow copy, so one plan built per source schema can
// serve every file of that schema.
func (p *Plan) ForSource(name string) *Plan {
	q := *p
	q.cfg.source = name
	return &q
}

// ForSource returns a copy of the error naming another file with the same schema.
func (e *MismatchError) ForSource(name string) *MismatchError {
	return &MismatchError{Source: name, Problems: e.Problems}
}
