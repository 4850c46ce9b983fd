"""Hand labelling at teacher quality (docs LABELLING.md): batches to read, their rendering, the
labels' checks and the agreement between two labellers."""
