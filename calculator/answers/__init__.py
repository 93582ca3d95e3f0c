"""Answers built on the formulas: one function per verdict (verdicts), accuracy against measurements, the paste-ready Markdown answers, the evidence readers."""
