"""MPI jobs and the commands that measure with them: the launcher every job starts
(launcher.py), a job's ranks, JSON in and rank 0's result out (mpijob.py, worker.py), and the
harness a measuring command runs under, its flags, figures and JSON (harness.py). The
benchmarks, the batch-size commands and the planner's calibration all start their jobs here."""
