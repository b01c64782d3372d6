"""The cluster's web dashboard: `shock serve --dashboard PORT` (docs/running-a-cluster.md)."""
