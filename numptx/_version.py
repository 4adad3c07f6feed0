"""numptx's version: a leaf module, so any stage can read it without importing the package."""
__version__ = "0.1.0"
