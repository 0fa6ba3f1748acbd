"""Sub-commands of the ``pricestream`` CLI, one module per command group (thin shells over library calls)."""
