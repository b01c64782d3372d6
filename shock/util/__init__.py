"""Small helpers with no place in the contracts: modules imported on first use, did-you-mean."""
