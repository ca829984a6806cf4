package main

import (
	"fmt"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slicemeter/slicemeter/internal/webserver"
)

// webFlags adds exporter-toolkit's web flags (--web.listen-address defaulting to address,
// --web.config.file, --web.systemd-socket) and the limits' flags to c.
func webFlags(c *kingpin.CmdClause, address string) *webserver.Flags {
	f := &webserver.Flags{FlagConfig: kingpinflag.AddFlags(c, address)}
	d := webserver.DefaultLimits()
	c.Flag("web.read-header-timeout", "Longest time to read a request's headers.").Default(d.ReadHeaderTimeout.String()).DurationVar(&f.Limits.ReadHeaderTimeout)
	c.Flag("web.read-timeout", "Longest time to read a whole request, body included (a slower body is cut); 0: none.").Default(d.ReadTimeout.String()).DurationVar(&f.Limits.ReadTimeout)
	c.Flag("web.write-timeout", "Longest time from the end of a request's headers to the end of its response; 0: none.").Default(d.WriteTimeout.String()).DurationVar(&f.Limits.WriteTimeout)
	c.Flag("web.idle-timeout", "How long an idle keep-alive connection is kept; 0: the read timeout.").Default(d.IdleTimeout.String()).DurationVar(&f.Limits.IdleTimeout)
	c.Flag("web.max-connections", "Most open connections; more wait to be accepted. 0: no cap.").Default(fmt.Sprint(d.MaxConnections)).IntVar(&f.Limits.MaxConnections)
	c.Flag("web.max-client-connections", "Most open connections from one client IP; more are closed at once. 0: no cap.").Default(fmt.Sprint(d.MaxClientConnections)).IntVar(&f.Limits.MaxClientConnections)
	return f
}
