"""In-container instruments; mounted read-only at /opt/harness-instrument in the container."""
