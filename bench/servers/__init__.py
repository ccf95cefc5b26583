"""The servers the benchmark starts, one process each: the floor, the peers and longtools' tools."""
