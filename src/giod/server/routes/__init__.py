"""Routes of the giod server, one module per concern."""
