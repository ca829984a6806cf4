package pricebook

import (
	"errors"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// LoadFileOrScenario is the price book of a file (pricebook.Load) or the one a scenario file
// carries (Scenario.Book): exactly one of the two is given, as the commands' --pricebook and
// --scenario flags are.
func LoadFileOrScenario(file, scenarioFile string) (*pricebook.PriceBook, error) {
	switch {
	case file != "" && scenarioFile != "":
		return nil, errors.New("give --pricebook or --scenario, not both")
	case file != "":
		return pricebook.Load(file)
	case scenarioFile != "":
		sc, err := scenario.Load(scenarioFile)
		if err != nil {
			return nil, err
		}
		return sc.Book, nil
	default:
		return nil, errors.New("a price book is required: --pricebook FILE or --scenario FILE")
	}
}
