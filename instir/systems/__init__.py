"""Systems: adapters that load the papers' retrievers and rerankers (and user cards) the way
their authors ran them."""
