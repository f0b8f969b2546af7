"""The version of quicsm, in the floor so every layer can name the tool that wrote a file (bundles,
reports, run records) without importing the package's facade."""

__version__ = "0.1.0"
