"""Speed benchmarks: ``python -m benchmarks`` runs them all (they are not tests)."""
