package pricebook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// canonical is the book as JSON of its own fields (PriceBook's json tags), with the zone by
// name in place of the *time.Location: the field named timezone here hides PriceBook's
// (encoding/json takes the shallower of two fields of one name), and comes last, as it always
// has. A field added to PriceBook is in the canonical form without a change here.
type canonical struct {
	*fields
	Timezone string `json:"timezone,omitempty"`
}

// fields is PriceBook without its methods, so that encoding/json writes its fields.
type fields PriceBook

// Canonical is the book's canonical text and its hash (SHA-256, hex), as the attribution
// service records it (table price_books): JSON of the type with sorted map keys (encoding/json
// sorts them), changes in effective order at UTC, durations in ns, empty maps left out and the
// zone by name (none for UTC), so that the same book, however its file is written, has the
// same text and hash.
func (pb *PriceBook) Canonical() (text []byte, hash string, err error) {
	c := *pb
	c.Changes = slices.Clone(pb.Changes)
	slices.SortStableFunc(c.Changes, func(a, b Change) int { return a.Effective.Compare(b.Effective) })
	for i := range c.Changes {
		c.Changes[i].Effective = c.Changes[i].Effective.UTC()
	}
	zone := ""
	if pb.Location != nil && pb.Location != time.UTC {
		zone = pb.Location.String()
	}
	text, err = json.Marshal(canonical{fields: (*fields)(&c), Timezone: zone})
	if err != nil {
		return nil, "", fmt.Errorf("render the price book canonically: %w", err)
	}
	sum := sha256.Sum256(text)
	return text, hex.EncodeToString(sum[:]), nil
}

// FromCanonical is the book of a canonical text (Canonical).
func FromCanonical(text []byte) (*PriceBook, error) {
	pb := &PriceBook{}
	c := canonical{fields: (*fields)(pb)}
	if err := json.Unmarshal(text, &c); err != nil {
		return nil, fmt.Errorf("read a recorded price book: %w", err)
	}
	for i := range pb.Changes {
		pb.Changes[i].Effective = pb.Changes[i].Effective.UTC()
	}
	if c.Timezone != "" {
		loc, err := time.LoadLocation(c.Timezone)
		if err != nil {
			return nil, fmt.Errorf("read a recorded price book: timezone %q: %w", c.Timezone, err)
		}
		pb.Location = loc
	}
	return pb, nil
}
