"""The data-parallel benchmark: scaling, bucketed against naive, exposed communication, DDP."""
