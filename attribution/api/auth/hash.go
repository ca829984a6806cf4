package auth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/bcrypt"

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
func HashEntry(r io.Reader, w io.Writer, name string) error {
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
	_, err = fmt.Fprintf(w, "  - name: %s\n    hash: %q\n    lookup: \"%08x\"     # picks this entry without bcrypt\n    role: tenant          # operator, finance, scheduler or tenant\n    tenants: [TENANT]     # for tenant; optional for scheduler\n", name, h, LookupKey(token))
	return err
}
