"""The tensor benchmark: Megatron layers' collectives, speed-up and bytes held per rank."""
