"""kbplatform's contract worker: runs one side of an evaluation in its own process."""
