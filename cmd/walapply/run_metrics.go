package main

import (
	"context"
	"net"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/metrics"
)

// metricsListening is told the metrics server's address once it listens
// (tests use it to find a port chosen by the system).
var metricsListening = func(net.Addr) {}

// startMetrics serves Prometheus metrics and the /healthz and /readyz
// probes on addr for the applier configured by cfg, whose Observer it
// sets. stop shuts the server down.
func startMetrics(addr string, readyMaxLag time.Duration, cfg *apply.Config, log zerolog.Logger) (stop func(), err error) {
	c := metrics.New(metrics.Options{ReadyMaxLag: readyMaxLag,
		Applier: metrics.ApplierInfo{Name: applierName(cfg), Slot: cfg.Slot, Publications: cfg.Publications}})
	srv, err := metrics.Listen(addr, c)
	if err != nil {
		return nil, err
	}
	cfg.Observer = c
	log.Info().Stringer("metrics_addr", srv.Addr()).Float64("ready_max_lag_seconds", readyMaxLag.Seconds()).
		Msg("serving /metrics, /healthz and /readyz")
	metricsListening(srv.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			log.Warn().Err(err).Msg("stopping the metrics server")
		}
	}, nil
}
