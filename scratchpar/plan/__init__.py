"""The planner: a cluster's constants, measured or from datasheets, and what each strategy
costs on it."""
