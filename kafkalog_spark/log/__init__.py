"""On-disk model (log layer): log dirs, partitions, segments, crash-safe file operations."""
