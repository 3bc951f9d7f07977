// Command otelcol is the OpenTelemetry Collector ctrlscope's tests send their spans to: the
// upstream collector (go.opentelemetry.io/collector/otelcol), built from the Go module proxy with
// only what the tests need -- the OTLP receiver, which takes OTLP/HTTP exactly as a production
// collector does, and contrib's file exporter, which writes every batch it receives as one line of
// OTLP JSON that a test reads back. Nothing here is a mock: the spans a test asserts went through
// the same receiver, pipeline and exporter code a deployed collector runs.
//
// It is a module of its own (its dependency graph is the collector's, far larger than the
// instrumentation module's), pinned to one collector release: core v0.161.0 / v1.67.0 and contrib
// v0.161.0, the newest release at which contrib's file exporter builds. controllers/realcluster/otelcol.py
// builds it into a cache outside the clone, keyed by this directory's go.mod, go.sum and sources,
// and runs it on loopback; `make otelcol` (part of `make test`) builds it once.
//
// Usage: otelcol --config file:/path/to/config.yaml (envprovider resolves ${VAR} references too).
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// version is the collector release the module pins (the BuildInfo the collector logs and reports).
const version = "v0.161.0"

func components() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	// The service needs a telemetry factory for its own logs and metrics; the tests' configs turn
	// its metrics off so that it binds no port besides the receiver's.
	return otelcol.Factories{Receivers: receivers, Exporters: exporters, Telemetry: otelconftelemetry.NewFactory()}, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "ctrlscope's test collector: OTLP in, OTLP JSON files out", Version: version},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			// env: the collector's default scheme for ${VAR} references must be among the providers.
			ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory()},
		}},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatal(err)
	}
}
