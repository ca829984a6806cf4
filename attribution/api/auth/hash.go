package auth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// HashCost is the bcrypt cost of the hashes HashEntry makes: about 90 ms a check on a shared
// server core (BenchmarkPrincipal: 180 ms at cost 11), paid once per token and process
// (Authenticator caches what it verified). The tokens are long and random, so a higher cost
// would add little against guessing and much to what a flood of wrong tokens costs.
const HashCost = 10

// minTokenLen: a shorter token could be guessed through the API.
const minTokenLen = 16

// HashEntry reads a token (its first line) from r and writes the auth file entry that admits
// it to w: what `slicemeter api token hash` prints. The entry's lookup key lets the service
// find it without bcrypt, so that a wrong token costs one hash, not a bcrypt check per entry.
//
// Without a role it prints placeholders to edit (role: tenant, tenants: [TENANT]); HashEntryFor
// prints an entry ready for the file.
func HashEntry(r io.Reader, w io.Writer, name string) error {
	return HashEntryFor(r, w, name, "", nil)
}

// HashEntryFor is HashEntry with the entry's role and tenants filled in ("" role: the
// placeholders). The role and tenants are checked as the auth file's parser checks them, before
// the token is read: a tenant names at least one tenant, operator and finance none, scheduler
// any; errors are usage errors naming --role and --tenant. The entry printed parses (Parse).
func HashEntryFor(r io.Reader, w io.Writer, name string, role api.Role, tenants []string) error {
	if role != "" {
		if !slices.Contains(api.Roles(), role) {
			return usage.Errorf("--role %q: expected one of %s", role, rolesText())
		}
		switch {
		case role == api.RoleTenant && len(tenants) == 0:
			return usage.Errorf("--role tenant: expected --tenant NAME (repeatable): the tenants this token reads")
		case (role == api.RoleOperator || role == api.RoleFinance) && len(tenants) > 0:
			return usage.Errorf("--tenant %s: expected none for --role %s (it covers every tenant)", strings.Join(tenants, ","), role)
		}
	} else if len(tenants) > 0 {
		return usage.Errorf("--tenant %s: expected --role too (tenant or scheduler)", strings.Join(tenants, ","))
	}

	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the token from stdin: %w", err)
	}
	token := strings.TrimRight(line, "\r\n")
	if len(token) < minTokenLen || len(token) > maxTokenLen {
		return usage.Errorf("stdin: a token of %d bytes; expected %d to %d (bcrypt's limit), e.g. from `openssl rand -hex 24`", len(token), minTokenLen, maxTokenLen)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(token), HashCost)
	if err != nil {
		return fmt.Errorf("hash the token: %w", err)
	}
	if role == "" {
		_, err = fmt.Fprintf(w, "  - name: %s\n    hash: %q\n    lookup: \"%08x\"     # picks this entry without bcrypt\n    role: tenant          # operator, finance, scheduler or tenant\n    tenants: [TENANT]     # for tenant; optional for scheduler\n", name, h, LookupKey(token))
		return err
	}
	entry := fmt.Sprintf("  - name: %s\n    hash: %q\n    lookup: \"%08x\"\n    role: %s\n", yamlScalar(name), h, LookupKey(token), role)
	if len(tenants) > 0 {
		quoted := make([]string, len(tenants))
		for i, t := range tenants {
			quoted[i] = yamlScalar(t)
		}
		entry += "    tenants: [" + strings.Join(quoted, ", ") + "]\n"
	}
	if _, err := Parse("the entry", []byte("tokens:\n"+entry)); err != nil {
		return usage.Errorf("--name, --role or --tenant: %w", err)
	}
	_, err = io.WriteString(w, entry)
	return err
}

// yamlScalar is s as a YAML scalar: as is where YAML reads it back as the same string, else
// double-quoted.
func yamlScalar(s string) string {
	var m map[string]string
	if err := yaml.Unmarshal([]byte("v: "+s), &m); err == nil && m["v"] == s && !strings.ContainsAny(s, "#,[]{}\"'\n") {
		return s
	}
	return strconv.Quote(s)
}
