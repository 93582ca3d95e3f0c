"""What the widgets share and are not widgets themselves: the inputs bound to the URL (the
page's case and a calculator's changes to it, pickers, number fields) and the figures several
calculators draw. The widget registry (guide.widgets.registry) walks only widgets, so these
live here, outside guide/widgets/ (tests/test_layers.py checks it)."""
