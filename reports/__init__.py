"""HTML reports (plotly). The only part of wmtp that imports plotly; it needs no GPU and no torch."""
