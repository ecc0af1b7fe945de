"""Front-ends: one folder per framework, each a `loader` (framework graph -> the core graph) and a
`runner` (the original model run with every stage tensor captured), as Polygraphy's backends are."""
