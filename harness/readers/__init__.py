"""Layer 8, readers: what reads the journals and sealed run folders the layers below
wrote, and writes only its own outputs (a morning report, `status`, `show`, a bundle).
"""
