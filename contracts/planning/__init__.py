"""Planning: loads a contract version from the registry, compiles its rules and decides which rules
run in which order with which actions, and which migrations lead from a writer to the target. Plans
are data; the engine runs them (docs/architecture.md)."""
