package scenario

import "testing"

// The canonical hashes of the price books that the repository's scenarios carry, as recorded
// before scenarios read their book with pricebook.ParseFields (pricebook.FromScenario then): the
// attribution service run with --scenario compares them with the ones stored in price_books,
// and another hash would make it attribute everything again.
func TestScenarioBookHashesUnchanged(t *testing.T) {
	for file, want := range map[string]string{
		"../../attribution/service/testdata/shards.yaml":        "279931541a2f33b28a2f2ab1365498753f0347c90bbe34ce1316e38ee2d577c8",
		"../../attribution/fleet/testdata/fleet-economics.yaml": "e1bc795710976bb09ddcb2cc52a35bb30a82d829529eb91bad4913f62468bcc5",
		"../../deploy/demo/fleet.yaml":                          "e0f466eb43e9e1be1372a7c95b3d1419196d9c544b5fb881a6cb3369db196768",
		"../../schemas/scenario/testdata/share-timeslice.yaml":  "2f061f01206083e1c87cbebf77552329ffe6accd4d4a1eb7b0250053e1f88890",
		"../../schemas/scenario/testdata/vgpu-timeslice.yaml":   "4620f5d7f0f98549b483fba482f685a8b6621c22d7e63eaa7d5d449dfee59c0c",
		"../../schemas/scenario/testdata/vgpu-phase.yaml":       "1a9eaa8f322bdb38c890975ffb1ceb35e14eb3a5adea512a8ce7666584abe22f",
		"../../schemas/scenario/testdata/outage-coldstart.yaml": "63cb282b3087623dddb7ef575c295e0e93cb388c8d25f39812b9aaad81e85ee2",
		"../../schemas/scenario/testdata/mig-basic.yaml":        "279931541a2f33b28a2f2ab1365498753f0347c90bbe34ce1316e38ee2d577c8",
		"../../exporter/promcollector/testdata/node.yaml":       "e2333f44df3ab154df12b1f711fb983b4942851fd257527851d1ffd9b0a03d84",
		"../../exporter/service/testdata/loop.yaml":             "143d6533cb1442736a58ef85ffff1db1fa0981617dad56ddbd75e3a3c5da2cab",
		"../../exporter/capture/testdata/node.yaml":             "e2333f44df3ab154df12b1f711fb983b4942851fd257527851d1ffd9b0a03d84",
		"../../exporter/testdata/mig-nogpm.yaml":                "e2333f44df3ab154df12b1f711fb983b4942851fd257527851d1ffd9b0a03d84",
		"../../exporter/testdata/node72.yaml":                   "e2333f44df3ab154df12b1f711fb983b4942851fd257527851d1ffd9b0a03d84",
		"../../exporter/testdata/node184.yaml":                  "e48207fd8bda0a42216561561422fcde6dda61894ce18dad71f0614f4b6c25aa",
		"../../e2e/testdata/replicas.yaml":                      "f63e31619a638f0007e88800514165369458474a5f3e1aa591871e246e8ac43c",
	} {
		s, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := s.Book.Canonical(); err != nil || got != want {
			t.Errorf("%s: canonical hash of its book %s (%v), recorded %s", file, got, err, want)
		}
	}
}
