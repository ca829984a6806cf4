package allocations

// SetLimits makes a store's lookups carry at most lookupBytes of names and its inserts at
// most insertRows rows, for tests of the chunking.
func SetLimits(s *Store, lookupBytes, insertRows int) {
	s.lookupBytes, s.insertRows = lookupBytes, insertRows
}
