"""Demo mode only: the Terra simulator, the demo payloads and feed, `rundemo`, `terra_simulate`,
the example workflow and the graph demo. Production code never imports this package."""
