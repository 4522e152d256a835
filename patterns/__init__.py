"""Ready-made patterns (fraud, anomaly, operations), built only from the public API."""
