"""scratchpar: parallel deep-learning training from scratch on NumPy/CuPy and MPI."""

__version__ = "0.1.0"
