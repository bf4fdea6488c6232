package cli

// defaultMemoryShare is the share of the machine's RAM a CPU task's inputs and outputs may take.
const defaultMemoryShare = 0.5
