"""Input files: the safe YAML loader, the schemas of campaigns, controls and the image lock."""
