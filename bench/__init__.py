"""Benchmarks and accuracy measurements. Not tests: they report numbers for the README."""
