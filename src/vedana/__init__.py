"""vedana: build and query a knowledge base from Grist."""

__version__ = "0.1.0"
