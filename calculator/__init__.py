"""The calculation engine of the guide: exact model memory, no Streamlit.

Import what you need from the submodules (`calculator.memory.estimate`, `calculator.core.precision`, ...);
importing the package itself is free, and torch is imported only when a model is built.
"""
