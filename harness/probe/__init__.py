"""Layer 5, probe: runs what the host has (gates' commands, git, OpenSSH, Docker, GPU
tools) and hands the judge (layer 4, which never runs anything nor imports this layer)
typed facts."""
