"""Entry point: `streamlit run Home.py` (or `make run`)."""

from guide.app import run

run()
