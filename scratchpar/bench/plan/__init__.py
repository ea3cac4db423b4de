"""The planner's validation: every layout runnable here, predicted and measured side by side."""
