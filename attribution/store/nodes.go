package store

import (
	"slices"

	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
)

// Nodes are the nodes of the GPUs present in what was read.
func (p *Presence) Nodes() []string {
	seen := map[string]bool{}
	var out []string
	for g := range p.spans {
		if !seen[g.Node] {
			seen[g.Node] = true
			out = append(out, g.Node)
		}
	}
	slices.Sort(out)
	return out
}

// Nodes limits a read to some nodes' rows: an attribution replica that shares the fleet by
// node reads only the nodes it owns, not the whole fleet's rows to drop most of them in Go.
// The zero value is every node.
type Nodes struct {
	only bool
	list []string
}

// OnlyNodes is the nodes given (none: no node at all).
func OnlyNodes(nodes []string) Nodes { return Nodes{only: true, list: slices.Clone(nodes)} }

// All says whether n is every node.
func (n Nodes) All() bool { return !n.only }

// none says whether n is no node: a read of it returns nothing, without a query.
func (n Nodes) none() bool { return n.only && len(n.list) == 0 }

// nodesTable is a set of nodes, bound as one packed array (packStrings): a replica owns
// hundreds of nodes at cloud scale, and a packed literal parses like any other on 18.16.
const nodesTable = `SELECT arrayJoin(` + chquery.StringArray + `)`

// clause is the condition on the node column that limits a query to n, to follow another
// condition (empty for every node), and its arguments.
func (n Nodes) clause() (string, []any) {
	if !n.only {
		return "", nil
	}
	return " AND node IN (" + nodesTable + ")", []any{chquery.PackStrings(n.list)}
}
