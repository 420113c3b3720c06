"""Thin command-line layer: parse, call the library, print. No logic lives here."""
