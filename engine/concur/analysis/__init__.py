"""Domain analyses built on the solver: simulation, calibration, remedies and plots."""
